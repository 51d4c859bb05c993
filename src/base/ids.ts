/**
 * Identifiers and secrets: `<prefix>_<base62>` from the CSPRNG (node:crypto), and the request id.
 */
import { randomBytes } from 'node:crypto';

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** `n` base62 characters from the CSPRNG (rejection sampling: no modulo bias). */
export function randomBase62(n: number): string {
  let out = '';
  while (out.length < n) {
    const bytes = randomBytes(n * 2);
    for (let i = 0; i < bytes.length && out.length < n; i++) {
      const b = bytes[i]! & 0x3f;
      if (b < 62) out += ALPHABET[b];
    }
  }
  return out;
}

/** A resource id such as `stm_…` (24 random base62 characters: ~143 bits). */
export function newId(prefix: string): string {
  return `${prefix}_${randomBase62(24)}`;
}

const processTag = randomBase62(8);
let requestCounter = 0;
/**
 * The prefix of the request ids the native HTTP front gives the answers it writes itself
 * (docs/http.md "Media objects answered in native code"): `req_<process tag>N`, then its own
 * base-36 counter. `newRequestId`'s counters are lower-case base 36, so the two never meet.
 */
export const nativeRequestIdPrefix = `req_${processTag}N`;
/** A request id `req_<process tag><counter>`: unique per process run, cheap enough for every HLS response. */
export function newRequestId(): string {
  requestCounter = (requestCounter + 1) % Number.MAX_SAFE_INTEGER;
  return `req_${processTag}${requestCounter.toString(36)}`;
}
