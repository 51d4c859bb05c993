/**
 * Who may read `GET /metrics` (docs/behaviour.md "Operating the node"): a client on loopback, or one
 * that presents `Authorization: Bearer <SKYLARK_METRICS_TOKEN>` (RFC 6750 §2.1). Anyone else: 401
 * without credentials (with `WWW-Authenticate: Bearer`, RFC 6750 §3), 403 with wrong ones or when
 * no token is set.
 */
import { BlockList, isIP } from 'node:net';
import { timingSafeEqual, createHash } from 'node:crypto';

const LOOPBACK = new BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');

/** Whether `ip` (IPv4, IPv6 in any form, or IPv4-mapped IPv6) is a loopback address. */
export function isLoopback(ip: string): boolean {
  const mapped = /^(?:0{0,4}:){5}ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip) ?? /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  const s = mapped ? mapped[1]! : ip;
  const family = isIP(s);
  if (family === 0) return false;
  return LOOPBACK.check(s, family === 4 ? 'ipv4' : 'ipv6');
}

/** Equal strings, compared in constant time (over their SHA-256 digests, so lengths leak nothing). */
function same(a: string, b: string): boolean {
  return timingSafeEqual(createHash('sha256').update(a).digest(), createHash('sha256').update(b).digest());
}

/**
 * The decision for one scrape: `client` is the client address (after trusted proxies),
 * `authorization` the request's `Authorization` header ('' when absent), `token` the configured
 * token (undefined: loopback only).
 * @returns 200 (allowed), 401 (no credentials) or 403 (wrong credentials, or no token is set)
 */
export function metricsAccess(client: string, authorization: string, token: string | undefined): 200 | 401 | 403 {
  if (isLoopback(client)) return 200;
  if (token === undefined) return 403;
  const m = /^Bearer +(\S+) *$/i.exec(authorization);
  if (!m) return authorization === '' ? 401 : 403;
  return same(m[1]!, token) ? 200 : 403;
}
