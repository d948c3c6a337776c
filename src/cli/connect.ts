/**
 * What a command that reaches a server by URL needs: the URL shown without its password, a
 * driver's message with the URL's secrets cut out, a bound on each step, and a failure that says
 * what to check. A URL may carry a password (`redis://:secret@host`, `postgres://user:secret@host`),
 * so none of these ever prints one.
 */

/** How a password, or a query value, is shown. */
const HIDDEN = '***';

/**
 * The URL as a message may show it: scheme, user, host, port and path; a password becomes `***`
 * and a query string (which may hold `password=…`) `?…`. A URL that does not parse shows only its
 * scheme, since where its password ends cannot be told.
 */
export function shownUrl(url: string): string {
  if (!URL.canParse(url)) {
    const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(url)?.[1];
    return scheme === undefined ? 'a URL that does not parse' : `${scheme}://… (not shown: it does not parse as a URL)`;
  }
  const parsed = new URL(url);
  const password = parsed.password === '' ? '' : `:${HIDDEN}`;
  const user = parsed.username === '' && password === '' ? '' : `${parsed.username}${password}@`;
  const path = parsed.pathname === '/' ? '' : parsed.pathname;
  return `${parsed.protocol}//${user}${parsed.host}${path}${parsed.search === '' ? '' : '?…'}`;
}

/** The parts of `url` a message must never hold: the URL itself, its password (as written and decoded), its query values. */
function secretsOf(url: string): string[] {
  const secrets = [url];
  const add = (value: string) => {
    if (value === '') return;
    secrets.push(value);
    try {
      secrets.push(decodeURIComponent(value));
    } catch {
      // Not percent-encoded as a whole: the value as written is enough.
    }
  };
  if (URL.canParse(url)) {
    const parsed = new URL(url);
    add(parsed.password);
    for (const [, value] of parsed.searchParams) add(value);
  } else {
    // Up to the last '@' is the user information, however it is mangled; the password follows ':'.
    const userinfo = /^[a-z][a-z0-9+.-]*:\/\/(.*)@/i.exec(url)?.[1];
    if (userinfo !== undefined) add(userinfo.includes(':') ? userinfo.slice(userinfo.indexOf(':') + 1) : userinfo);
  }
  // Longest first, so a secret that contains another is cut out whole.
  return [...new Set(secrets)].sort((a, b) => b.length - a.length);
}

/** A driver's message with the URL shown as {@link shownUrl} shows it and its secrets cut out. */
export function scrubbed(text: string, url: string): string {
  let out = text.replaceAll(url, shownUrl(url));
  for (const secret of secretsOf(url).slice(1)) out = out.replaceAll(secret, HIDDEN);
  return out;
}

/** A step's outcome within its bound: its value, or `timedOut`. */
export type Bounded<T> = { timedOut: false; value: T } | { timedOut: true };

/**
 * `work` within `ms`: its value, its error (thrown), or `{ timedOut: true }` once `ms` has passed.
 * Work still running then is left to its owner to stop; its later failure is swallowed here, so
 * it cannot end the process as an unhandled rejection.
 */
export async function within<T>(work: Promise<T>, ms: number): Promise<Bounded<T>> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<Bounded<T>>((resolve) => {
    timer = setTimeout(() => resolve({ timedOut: true }), ms);
  });
  const settled = work.then((value): Bounded<T> => ({ timedOut: false, value }));
  settled.catch(() => {});
  try {
    return await Promise.race([settled, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

/** The network error codes a connection attempt fails with, and what each means to the person running the command. */
const NETWORK: Record<string, string> = {
  ECONNREFUSED: 'connection refused: nothing listens on that host and port',
  ENOTFOUND: 'the host name does not resolve',
  EAI_AGAIN: 'the host name could not be resolved just now',
  EHOSTUNREACH: 'the host cannot be reached',
  ENETUNREACH: 'the network cannot be reached',
  ETIMEDOUT: 'the connection timed out',
  ECONNRESET: 'the server closed the connection',
};

/** What a server is, for messages: `Redis`, `PostgreSQL` or `SQS`. */
export type ServerKind = 'Redis' | 'PostgreSQL' | 'SQS';

/** How to make sure the URL reaches the right server, by kind. */
const CHECK: Record<ServerKind, string> = {
  Redis: `check that Redis is running there and the URL's host and port (rediss:// for TLS)`,
  PostgreSQL: `check that PostgreSQL is running there and the URL's host and port (and sslmode, when it needs TLS)`,
  SQS: `check the queue URL, the region (--region or AWS_REGION), the credentials the AWS SDK finds (AWS_PROFILE, AWS_ACCESS_KEY_ID…) and, for a local SQS, --endpoint`,
};

/** The code a driver's error carries (`ECONNREFUSED`, PostgreSQL's SQLSTATE), or the leading word of a Redis reply error. */
function codeOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === 'string') return code;
  const message = error instanceof Error ? error.message : '';
  return /^(WRONGPASS|NOAUTH|NOPERM)\b/.exec(message)?.[1];
}

/**
 * The error of a command that could not reach its server: which server, the URL without its
 * password, what went wrong, and what to check. Its message is the whole line the command prints.
 */
export function unreachable(kind: ServerKind, url: string, cause: unknown): Error {
  const where = `${kind} at ${shownUrl(url)}`;
  const code = codeOf(cause);
  let what: string;
  if (code !== undefined && code in NETWORK) what = `${NETWORK[code]} (${code}): ${CHECK[kind]}`;
  else if (code === 'WRONGPASS' || code === 'NOAUTH' || code === 'NOPERM' || code === '28P01' || code === '28000') {
    what = `the server refused the credentials (${code}): check the user and password in the URL`;
  } else if (code === '3D000') what = `the database does not exist (${code}): check the database name in the URL`;
  else {
    const message = cause instanceof Error ? cause.message : String(cause);
    what = `${scrubbed(message, url)}: ${CHECK[kind]}`;
  }
  return new Error(`cannot reach ${where}: ${what}`);
}

/** The error of a step that got no answer within the bound: nothing came back at all. */
export function noAnswer(kind: ServerKind, url: string, seconds: number, step: string): Error {
  return new Error(
    `no answer from ${kind} at ${shownUrl(url)} within ${seconds} s ${step}: ${CHECK[kind]}, and that no firewall holds the connection; on a slow link, raise --timeout`,
  );
}
