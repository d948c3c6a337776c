/**
 * The store's Lua scripts, each sent by its SHA-1 (EVALSHA) and by its text (EVAL) only when the
 * server does not have it yet.
 */

import { toHex } from '../internal.ts';
import { CLAIM, COMPLETE, EXTEND, RELEASE } from './claims.lua.ts';
import type { ScriptClient } from './driver.ts';
import { ENTITY_CLAIM, ENTITY_COMPLETE, ENTITY_EXTEND, ENTITY_RELEASE, FORGET_VERSION } from './ordering.lua.ts';
import { UNSIGNED_CLAIM, UNSIGNED_COMPLETE, UNSIGNED_EXTEND, UNSIGNED_RELEASE } from './unsigned.lua.ts';

/** A script's text and, once computed, the SHA-1 that EVALSHA names it by. */
export interface Script {
  readonly source: string;
  /** Its SHA-1, computed on first use. */
  sha: string | undefined;
}

const script = (source: string): Script => ({ source, sha: undefined });

/** The scripts of one key class. */
export interface Scripts {
  claim: Script;
  complete: Script;
  release: Script;
  extend: Script;
}

export const SIGNED: Scripts = { claim: script(CLAIM), complete: script(COMPLETE), release: script(RELEASE), extend: script(EXTEND) };
export const UNSIGNED: Scripts = { claim: script(UNSIGNED_CLAIM), complete: script(UNSIGNED_COMPLETE), release: script(UNSIGNED_RELEASE), extend: script(UNSIGNED_EXTEND) };
export const ENTITY_CLAIM_SCRIPT = script(ENTITY_CLAIM);
export const ENTITY_COMPLETE_SCRIPT = script(ENTITY_COMPLETE);
export const ENTITY_RELEASE_SCRIPT = script(ENTITY_RELEASE);
export const ENTITY_EXTEND_SCRIPT = script(ENTITY_EXTEND);
export const FORGET_VERSION_SCRIPT = script(FORGET_VERSION);

/** The SHA-1 that EVALSHA names a script by, via WebCrypto (every supported runtime has it). */
async function sha1Hex(source: string): Promise<string> {
  return toHex(new Uint8Array(await globalThis.crypto.subtle.digest('SHA-1', new TextEncoder().encode(source))));
}

function isNoScript(error: unknown): boolean {
  // ioredis' ReplyError and node-redis' ErrorReply both carry Redis' error line as the message:
  // "NOSCRIPT No matching script. Please use EVAL."; Upstash's UpstashError puts
  // "Command failed: " before it when the client pipelined the command.
  return error instanceof Error && /^(?:Command failed: )?NOSCRIPT/.test(error.message);
}

/** Runs a script by its SHA: one round trip, or two the first time a server sees it. */
export async function runScript(client: ScriptClient, s: Script, keys: string[], args: string[]): Promise<unknown> {
  const sha = (s.sha ??= await sha1Hex(s.source));
  try {
    return await client.evalsha(sha, keys, args);
  } catch (error) {
    if (!isNoScript(error)) throw error;
    // First use on this server, or its script cache was emptied (restart, SCRIPT FLUSH,
    // failover): EVAL runs the script and caches it, so the next EVALSHA finds it.
    return client.eval(s.source, keys, args);
  }
}
