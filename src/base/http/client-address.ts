/**
 * The client address of a request (docs/behaviour.md §4, docs/configuration.md
 * `SKYLARK_TRUSTED_PROXIES`): the socket peer, or — only when the peer is one of the configured
 * trusted proxies — the nearest `X-Forwarded-For` hop that is not itself a trusted proxy. The one
 * parser of the trusted-proxy list and the one address normalisation of the node: every cap, rate
 * limit, listener country and download count keys on what this module answers.
 */
import { BlockList, isIP } from 'node:net';

/**
 * An IP address in the one form the node compares and keys on: `::ffff:1.2.3.4` (an IPv4 peer of
 * a dual-stack socket) → `1.2.3.4`; brackets and zone ids removed; surrounding blanks trimmed.
 * @returns '' when `raw` is not an IP address
 */
export function normalizeIp(raw: string): string {
  let s = raw.trim();
  if (s.startsWith('[')) s = s.slice(1, s.indexOf(']') > 0 ? s.indexOf(']') : undefined);
  const zone = s.indexOf('%');
  if (zone >= 0) s = s.slice(0, zone);
  const m = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(s);
  if (m) s = m[1]!;
  // uWS gives IPv6 in full form with leading zeros; isIP accepts that.
  return isIP(s) ? s : '';
}

/**
 * Parses the trusted proxies (`SKYLARK_TRUSTED_PROXIES`: CIDRs such as `10.0.0.0/8`, `::1/128`, or
 * bare addresses, each a /32 or /128).
 * @throws Error naming the first entry that is not an IP address or CIDR, or whose prefix length
 *   is outside 0..32 (IPv4) / 0..128 (IPv6); the configuration refuses to start with it
 */
export function trustedProxies(cidrs: readonly string[]): BlockList {
  const list = new BlockList();
  for (const c of cidrs) {
    const [addr, len] = c.split('/');
    const ip = normalizeIp(addr ?? '');
    const family = isIP(ip);
    if (!family) throw new Error(`trusted proxy '${c}' is not an IP address or CIDR`);
    const max = family === 4 ? 32 : 128;
    const prefix = len === undefined ? max : len.trim() === '' ? NaN : Number(len);
    if (!Number.isInteger(prefix) || prefix < 0 || prefix > max) throw new Error(`trusted proxy '${c}' has a bad prefix length`);
    list.addSubnet(ip, prefix, family === 4 ? 'ipv4' : 'ipv6');
  }
  return list;
}

/** Whether `ip` (any form `normalizeIp` takes) is one of the trusted proxies. */
export function isTrustedProxy(list: BlockList, ip: string): boolean {
  return listed(list, normalizeIp(ip));
}

/** Whether the normalised address `ip` is in `list`. */
const listed = (list: BlockList, ip: string): boolean => ip !== '' && list.check(ip, isIP(ip) === 4 ? 'ipv4' : 'ipv6');

/**
 * The client address of a request, normalised (`normalizeIp`): the socket peer, unless it is a
 * trusted proxy; then the `X-Forwarded-For` list is walked from the right, skipping trusted hops,
 * and the first untrusted hop is the client (the leftmost when all are trusted; the last good one
 * when a hop is not an address). Like Express's `proxy-addr`.
 */
export function clientAddress(peer: string, forwardedFor: string, trusted: BlockList): string {
  let ip = normalizeIp(peer);
  if (!forwardedFor || !listed(trusted, ip)) return ip;
  const hops = forwardedFor.split(',');
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = normalizeIp(hops[i]!);
    if (!hop) return ip; // garbage in the header: stop at the last good address
    ip = hop;
    if (!listed(trusted, hop)) return hop;
  }
  return ip;
}
