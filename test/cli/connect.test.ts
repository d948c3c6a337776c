/**
 * How a command that connects by URL shows the URL and a driver's message: never the password,
 * nor a query value (which may be `password=…`), however the URL is written.
 */

import { describe, expect, it } from 'vitest';
import { noAnswer, scrubbed, shownUrl, unreachable } from '../../src/cli/connect.ts';

describe('shownUrl and scrubbed', () => {
  it('show scheme, user, host, port and path; the password as ***, a query as ?…', () => {
    expect(shownUrl('redis://:s3cret@127.0.0.1:6379')).toBe('redis://:***@127.0.0.1:6379');
    expect(shownUrl('rediss://default:s3cret@cache.internal:6380/2')).toBe('rediss://default:***@cache.internal:6380/2');
    expect(shownUrl('postgres://app:s3cret@db.internal/jobs?sslmode=require&password=s3cret')).toBe('postgres://app:***@db.internal/jobs?…');
    expect(shownUrl('postgresql://app@db.internal:5432/jobs')).toBe('postgresql://app@db.internal:5432/jobs');
    expect(shownUrl('redis://127.0.0.1')).toBe('redis://127.0.0.1');
    // '#' in a password that was not percent-encoded: where it ends cannot be told, so only the scheme shows.
    expect(shownUrl('postgres://app:pa#ss@db/jobs')).toBe('postgres://… (not shown: it does not parse as a URL)');
    expect(shownUrl('not a url')).toBe('a URL that does not parse');
  });

  it('cut the URL, its password (as written and decoded) and its query values out of a message', () => {
    const url = 'postgres://app:p%40ss-w0rd@db.internal/jobs?password=other-s3cret';
    const message = `connect to ${url} failed: password p@ss-w0rd or p%40ss-w0rd or other-s3cret refused`;
    const out = scrubbed(message, url);
    expect(out).toBe('connect to postgres://app:***@db.internal/jobs?… failed: password *** or *** or *** refused');
    expect(scrubbed('auth pa#ss failed', 'postgres://app:pa#ss@db/jobs')).toBe('auth *** failed');
  });

  it('name the server, the URL without its password, and what to check', () => {
    const url = 'redis://:s3cret@10.0.0.9:6379';
    const refused = Object.assign(new Error('connect ECONNREFUSED 10.0.0.9:6379'), { code: 'ECONNREFUSED' });
    expect(unreachable('Redis', url, refused).message).toBe(
      "cannot reach Redis at redis://:***@10.0.0.9:6379: connection refused: nothing listens on that host and port (ECONNREFUSED): check that Redis is running there and the URL's host and port (rediss:// for TLS)",
    );
    expect(unreachable('Redis', url, new Error('WRONGPASS invalid username-password pair')).message).toBe(
      'cannot reach Redis at redis://:***@10.0.0.9:6379: the server refused the credentials (WRONGPASS): check the user and password in the URL',
    );
    const pg = 'postgres://app:s3cret@db/jobs';
    expect(unreachable('PostgreSQL', pg, Object.assign(new Error('database "jobs" does not exist'), { code: '3D000' })).message).toContain('the database does not exist (3D000)');
    expect(unreachable('PostgreSQL', pg, new Error(`odd failure at ${pg} with s3cret`)).message).toBe(
      "cannot reach PostgreSQL at postgres://app:***@db/jobs: odd failure at postgres://app:***@db/jobs with ***: check that PostgreSQL is running there and the URL's host and port (and sslmode, when it needs TLS)",
    );
    expect(noAnswer('PostgreSQL', pg, 10, 'while connecting').message).toMatch(/^no answer from PostgreSQL at postgres:\/\/app:\*\*\*@db\/jobs within 10 s while connecting: /);
  });
});
