/**
 * Rate-limit response headers (docs/behaviour.md §9): draft-ietf-httpapi-ratelimit-headers
 * (`RateLimit-Policy: "paid";q=500;w=60`, `RateLimit: "paid";r=<remaining>;t=<seconds>` — both
 * Structured Field Lists, RFC 9651) and the de-facto `X-RateLimit-Limit/Remaining/Reset` (Unix
 * seconds); `Retry-After` (seconds) on 429.
 */
import type { RateDecision } from './sliding-window.js';

/**
 * Writes the headers for `d` under policy `name` into `into`. Seconds round up, so a client that
 * waits `t` (or `Retry-After`) seconds finds room.
 */
export function writeRateLimitHeaders(into: Record<string, string>, name: string, windowS: number, d: RateDecision, nowMs: number): void {
  const t = Math.max(d.allowed ? 1 : 0, Math.ceil(d.resetMs / 1000));
  into['RateLimit-Policy'] = `"${name}";q=${d.limit};w=${windowS}`;
  into['RateLimit'] = `"${name}";r=${d.remaining};t=${t}`;
  into['X-RateLimit-Limit'] = String(d.limit);
  into['X-RateLimit-Remaining'] = String(d.remaining);
  into['X-RateLimit-Reset'] = String(Math.ceil((nowMs + d.resetMs) / 1000));
  if (!d.allowed) into['Retry-After'] = String(Math.max(1, Math.ceil(d.resetMs / 1000)));
}
