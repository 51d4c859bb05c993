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

/** The eight 16-bit words of an IPv6 address (`isIP(s) === 6`, no zone, no brackets); an embedded IPv4 tail gives the last two. */
function ipv6Words(s: string): number[] {
  const words = (part: string): number[] =>
    part === ''
      ? []
      : part.split(':').flatMap((w) => {
          if (!w.includes('.')) return [parseInt(w, 16)];
          const [a, b, c, d] = w.split('.').map(Number) as [number, number, number, number];
          return [(a << 8) | b, (c << 8) | d];
        });
  const gap = s.indexOf('::');
  if (gap < 0) return words(s);
  const head = words(s.slice(0, gap));
  const tail = words(s.slice(gap + 2));
  return [...head, ...new Array<number>(8 - head.length - tail.length).fill(0), ...tail];
}

/**
 * The group a client address is capped and rate-limited as (docs/listeners.md "Per-address caps"):
 * an IPv4 address stands for itself; an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`, RFC 4291
 * §2.5.5.2) is that IPv4 address; any other IPv6 address stands for its /64 (`2001:db8:0:1::/64`:
 * RFC 4291 §2.5.4 gives every interface a 64-bit id, and one subscriber is routed a /64 or more, so
 * an attacker with one /64 must not get 2^64 slots). Brackets and a zone id (`%eth0`) are ignored.
 * Anything that is not an IP address is returned as given (it is then its own group).
 */
export function addressGroup(ip: string): string {
  let s = ip.trim();
  if (s.startsWith('[')) s = s.slice(1, s.indexOf(']') > 0 ? s.indexOf(']') : undefined);
  const zone = s.indexOf('%');
  if (zone >= 0) s = s.slice(0, zone);
  const family = net.isIP(s);
  if (family === 4) return s;
  if (family !== 6) return ip;
  const w = ipv6Words(s.toLowerCase());
  if (w[0] === 0 && w[1] === 0 && w[2] === 0 && w[3] === 0 && w[4] === 0 && w[5] === 0xffff) {
    return `${w[6]! >> 8}.${w[6]! & 255}.${w[7]! >> 8}.${w[7]! & 255}`;
  }
  return `${w.slice(0, 4).map((x) => x.toString(16)).join(':')}::/64`;
}
