/**
 * The client address a request comes from: the peer address, or — only when the peer is one of the
 * configured trusted proxies (`SKYLARK_TRUSTED_PROXIES`, CIDRs) — the right-most `X-Forwarded-For`
 * entry that is not itself a trusted proxy.
 */
import net from 'node:net';

/** A matcher for a list of CIDRs (`10.0.0.0/8`, `::1/128`, or a bare address). Invalid entries are ignored. */
export function cidrMatcher(cidrs: string[]): (ip: string) => boolean {
  const list = new net.BlockList();
  let any = false;
  for (const c of cidrs) {
    const [addr, bits] = c.split('/');
    const type = net.isIPv4(addr ?? '') ? 'ipv4' : net.isIPv6(addr ?? '') ? 'ipv6' : null;
    if (!type || !addr) continue;
    const prefix = bits === undefined ? (type === 'ipv4' ? 32 : 128) : Number(bits);
    if (!Number.isInteger(prefix)) continue;
    list.addSubnet(addr, prefix, type);
    any = true;
  }
  if (!any) return () => false;
  return (ip) => {
    const v4 = ip.startsWith('::ffff:') && net.isIPv4(ip.slice(7)) ? ip.slice(7) : ip;
    const type = net.isIPv4(v4) ? 'ipv4' : net.isIPv6(v4) ? 'ipv6' : null;
    return type !== null && list.check(v4, type);
  };
}

/** The client address of a request from `peer` with `forwardedFor` (the raw X-Forwarded-For value). */
export function clientIp(peer: string, forwardedFor: string, trusted: (ip: string) => boolean): string {
  if (!forwardedFor || !trusted(peer)) return peer;
  const hops = forwardedFor.split(',').map((s) => s.trim()).filter(Boolean);
  for (let i = hops.length - 1; i >= 0; i--) if (!trusted(hops[i]!)) return hops[i]!;
  return hops[0] ?? peer;
}

/** The group a client address is capped and rate-limited as (src/base/limits/address-key.ts). */
export { addressGroup } from '../../limits/address-key.js';
