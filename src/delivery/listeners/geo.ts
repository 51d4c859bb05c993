/**
 * Where a listener is (docs/behaviour.md §4): the client address (the socket peer, or the nearest
 * untrusted `X-Forwarded-For` hop when the peer is a configured trusted proxy) mapped to an ISO
 * 3166-1 alpha-2 country with the GeoLite2 Country data shipped in `geoip-country` (no runtime
 * download; data © MaxMind, CC BY-SA 4.0; see README "Listeners"). Loopback, private, link-local
 * and unique-local addresses are unknown (`null`). The address itself is never stored.
 */
import { BlockList, isIP } from 'node:net';
import { createRequire } from 'node:module';

interface GeoipCountry {
  lookup(ip: string): { country: string } | null;
}
let geoip: GeoipCountry | null = null;
/** Loaded on first use (~40 ms, ~10 MB): servers that never see a listener never pay for it. */
const db = (): GeoipCountry => (geoip ??= createRequire(import.meta.url)('geoip-country') as GeoipCountry);

/** Addresses that never have a country. */
const NON_PUBLIC = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12],
  ['192.168.0.0', 16], ['192.0.0.0', 24], ['198.18.0.0', 15], ['224.0.0.0', 4], ['240.0.0.0', 4],
] as const) NON_PUBLIC.addSubnet(net, prefix, 'ipv4');
for (const [net, prefix] of [['::', 127], ['fc00::', 7], ['fe80::', 10], ['ff00::', 8]] as const) NON_PUBLIC.addSubnet(net, prefix, 'ipv6');

/** `::ffff:1.2.3.4` → `1.2.3.4`; brackets and zone ids removed; '' when not an IP address. */
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

/** Trusted proxies as CIDRs (`SKYLARK_TRUSTED_PROXIES`). @throws Error on a malformed entry */
export function trustedProxies(cidrs: string[]): BlockList {
  const list = new BlockList();
  for (const c of cidrs) {
    const [addr, len] = c.split('/');
    const ip = normalizeIp(addr ?? '');
    const family = isIP(ip);
    if (!family) throw new Error(`trusted proxy '${c}' is not an IP address or CIDR`);
    const max = family === 4 ? 32 : 128;
    const prefix = len === undefined ? max : Number(len);
    if (!Number.isInteger(prefix) || prefix < 0 || prefix > max) throw new Error(`trusted proxy '${c}' has a bad prefix length`);
    list.addSubnet(ip, prefix, family === 4 ? 'ipv4' : 'ipv6');
  }
  return list;
}

const isTrusted = (list: BlockList, ip: string) => ip !== '' && list.check(ip, isIP(ip) === 4 ? 'ipv4' : 'ipv6');

/**
 * The client address of a request: the socket peer, unless it is a trusted proxy; then the
 * `X-Forwarded-For` list is walked from the right, skipping trusted hops, and the first untrusted
 * hop is the client (the leftmost when all are trusted). Like Express's `proxy-addr`.
 */
export function clientAddress(peer: string, forwardedFor: string, trusted: BlockList): string {
  let ip = normalizeIp(peer);
  if (!forwardedFor || !isTrusted(trusted, ip)) return ip;
  const hops = forwardedFor.split(',');
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = normalizeIp(hops[i]!);
    if (!hop) return ip; // garbage in the header: stop at the last good address
    ip = hop;
    if (!isTrusted(trusted, hop)) return hop;
  }
  return ip;
}

/** ISO 3166-1 alpha-2 country of a public address, else null (private, loopback, unknown). */
export function countryOf(ip: string): string | null {
  const family = isIP(ip);
  if (!family) return null;
  if (NON_PUBLIC.check(ip, family === 4 ? 'ipv4' : 'ipv6')) return null;
  return db().lookup(ip)?.country ?? null;
}
