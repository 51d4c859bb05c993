/**
 * Where webhooks may be sent (docs/behaviour.md §6, §9): `http(s)://` URLs without credentials, to
 * global unicast addresses only — at create time (400 `url_not_allowed`, for IP literals,
 * `localhost` names and names that resolve to other addresses) and again at delivery time, after
 * DNS resolution, on the very address the socket connects to (a `lookup` hook, so DNS rebinding
 * cannot slip between check and connect). The operator may allow any address
 * (`SKYLARK_WEBHOOKS_ALLOW_PRIVATE=1`; tests do).
 *
 * Global unicast, as an allow-list (docs/webhooks.md "Destinations"):
 * - IPv4: anything but the blocks of the IANA IPv4 Special-Purpose Address Registry (RFC 6890 and
 *   successors: 0/8, private, loopback, link-local, CGNAT 100.64/10, benchmarking 198.18/15,
 *   documentation, IETF protocol assignments, anycast service blocks), multicast 224/4 and the
 *   reserved 240/4 (with the broadcast address).
 * - IPv6: only 2000::/3 (RFC 4291 §2.4 global unicast), minus the special-purpose blocks of the
 *   IANA IPv6 Special-Purpose Address Registry inside it (2001::/23 with Teredo 2001::/32, 2001:db8::/32,
 *   6to4 2002::/16, 2620:4f:8000::/48, 3fff::/20). IPv4-mapped `::ffff:0:0/96` and NAT64
 *   `64:ff9b::/96` (RFC 6052) addresses are judged by the IPv4 address inside them; the other
 *   forms that carry IPv4 (IPv4-compatible `::/96`, local-use NAT64 `64:ff9b:1::/48`, 6to4, Teredo)
 *   are refused.
 */
import { BlockList, isIP, isIPv4, isIPv6, type LookupFunction } from 'node:net';
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';

/** A rule: a block, and why an address in it is refused. */
interface Rule {
  list: BlockList;
  why: string;
}

function rules(family: 'ipv4' | 'ipv6', blocks: ReadonlyArray<readonly [string, number, string]>): Rule[] {
  return blocks.map(([net, prefix, why]) => {
    const list = new BlockList();
    list.addSubnet(net, prefix, family);
    return { list, why };
  });
}

/** IPv4 blocks that are not global unicast (IANA IPv4 Special-Purpose Address Registry, multicast, reserved). */
const IPV4_REFUSED = rules('ipv4', [
  ['0.0.0.0', 8, '"this network" (RFC 791)'],
  ['10.0.0.0', 8, 'private (RFC 1918)'],
  ['100.64.0.0', 10, 'shared address space / CGNAT (RFC 6598)'],
  ['127.0.0.0', 8, 'loopback (RFC 1122)'],
  ['169.254.0.0', 16, 'link-local (RFC 3927)'],
  ['172.16.0.0', 12, 'private (RFC 1918)'],
  ['192.0.0.0', 24, 'IETF protocol assignments (RFC 6890)'],
  ['192.0.2.0', 24, 'documentation (RFC 5737)'],
  ['192.31.196.0', 24, 'AS112-v4 (RFC 7535)'],
  ['192.52.193.0', 24, 'AMT (RFC 7450)'],
  ['192.88.99.0', 24, '6to4 relay anycast (RFC 7526)'],
  ['192.168.0.0', 16, 'private (RFC 1918)'],
  ['192.175.48.0', 24, 'AS112 direct delegation (RFC 7534)'],
  ['198.18.0.0', 15, 'benchmarking (RFC 2544)'],
  ['198.51.100.0', 24, 'documentation (RFC 5737)'],
  ['203.0.113.0', 24, 'documentation (RFC 5737)'],
  ['224.0.0.0', 4, 'multicast (RFC 5771)'],
  ['240.0.0.0', 4, 'reserved (RFC 1112), with the broadcast address'],
]);

/** IPv6 global unicast (RFC 4291 §2.4). */
const IPV6_GLOBAL_UNICAST = rules('ipv6', [['2000::', 3, 'global unicast']])[0]!.list;

/** Special-purpose blocks inside 2000::/3 (IANA IPv6 Special-Purpose Address Registry). */
const IPV6_REFUSED = rules('ipv6', [
  ['2001::', 23, 'IETF protocol assignments (RFC 2928): Teredo, benchmarking, ORCHID, anycast services'],
  ['2001:db8::', 32, 'documentation (RFC 3849)'],
  ['2002::', 16, '6to4 (RFC 3056)'],
  ['2620:4f:8000::', 48, 'AS112 direct delegation (RFC 7534)'],
  ['3fff::', 20, 'documentation (RFC 9637)'],
]);

/**
 * The 16 bytes of an IPv6 literal (RFC 4291 §2.2 text forms, with or without a dotted-quad tail),
 * or null when `ip` is not one.
 */
export function ipv6Bytes(ip: string): Uint8Array | null {
  if (!isIPv6(ip)) return null;
  let s = ip;
  const tail = s.slice(s.lastIndexOf(':') + 1);
  if (tail.includes('.')) {
    const q = tail.split('.').map(Number);
    s = `${s.slice(0, s.length - tail.length)}${((q[0]! << 8) | q[1]!).toString(16)}:${((q[2]! << 8) | q[3]!).toString(16)}`;
  }
  const halves = s.split('::');
  const head = halves[0] ? halves[0].split(':') : [];
  const rest = halves.length > 1 && halves[1] ? halves[1].split(':') : [];
  const groups = halves.length > 1 ? [...head, ...Array<string>(8 - head.length - rest.length).fill('0'), ...rest] : head;
  if (groups.length !== 8) return null;
  const out = new Uint8Array(16);
  groups.forEach((g, i) => {
    const v = parseInt(g, 16);
    out[2 * i] = v >> 8;
    out[2 * i + 1] = v & 0xff;
  });
  return out;
}

/** The IPv4 address carried by an IPv4-mapped (`::ffff:0:0/96`) or NAT64 (`64:ff9b::/96`) address, or null. */
function judgedByIpv4(b: Uint8Array): string | null {
  const zeros = (from: number, to: number) => b.subarray(from, to).every((x) => x === 0);
  const mapped = zeros(0, 10) && b[10] === 0xff && b[11] === 0xff;
  const nat64 = b[0] === 0x00 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b && zeros(4, 12);
  return mapped || nat64 ? `${b[12]}.${b[13]}.${b[14]}.${b[15]}` : null;
}

/**
 * Why `ip` (an IPv4 or IPv6 literal, optionally in brackets or with a `%zone`) is not a global
 * unicast address a webhook may go to, or null when it is one. Not an IP literal → a reason too.
 */
export function addressProblem(ip: string): string | null {
  const bare = ip.replace(/^\[|\]$/g, '').replace(/%.*$/, '');
  if (isIPv4(bare)) return IPV4_REFUSED.find((r) => r.list.check(bare, 'ipv4'))?.why ?? null;
  const bytes = ipv6Bytes(bare);
  if (!bytes) return 'not an IP address';
  const v4 = judgedByIpv4(bytes);
  if (v4 !== null) {
    const inner = addressProblem(v4);
    return inner === null ? null : `carries ${v4}: ${inner}`;
  }
  if (!IPV6_GLOBAL_UNICAST.check(bare, 'ipv6')) return 'not IPv6 global unicast (2000::/3)';
  return IPV6_REFUSED.find((r) => r.list.check(bare, 'ipv6'))?.why ?? null;
}

/** Whether `ip` is anything but a global unicast address (see `addressProblem`). Non-IPs → true. */
export function isPrivateAddress(ip: string): boolean {
  return addressProblem(ip) !== null;
}

/** How names are resolved: `dns.lookup` with `all: true` (getaddrinfo, /etc/hosts included). */
export type Resolve = (
  hostname: string,
  options: { all: true; family?: number | undefined; hints?: number | undefined },
  callback: (err: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void,
) => void;

const systemResolve: Resolve = (hostname, options, callback) => dnsLookup(hostname, options, callback);

/** Why a destination was refused. `code` is the API error code / the attempt's error. */
export class DestinationError extends Error {
  constructor(readonly code: 'url_invalid' | 'url_not_allowed', message: string) {
    super(message);
    this.name = 'DestinationError';
  }
}

/** Largest URL accepted (characters). */
export const MAX_URL_LENGTH = 2048;

/**
 * Checks a webhook URL's form and, unless `allowPrivate`, that it names no private host by literal or
 * by a `localhost` name. Returns the normalized URL string.
 * @throws DestinationError `url_invalid` (not http(s), credentials, too long) or `url_not_allowed`
 */
export function checkUrlForm(raw: string, allowPrivate: boolean): URL {
  if (raw.length > MAX_URL_LENGTH) throw new DestinationError('url_invalid', `url must be at most ${MAX_URL_LENGTH} characters.`);
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new DestinationError('url_invalid', 'url must be an absolute http:// or https:// URL.');
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new DestinationError('url_invalid', 'url must be an http:// or https:// URL.');
  if (u.username || u.password) throw new DestinationError('url_invalid', 'url must not contain credentials.');
  if (!u.hostname) throw new DestinationError('url_invalid', 'url must name a host.');
  if (allowPrivate) return u;
  const host = u.hostname.replace(/^\[|\]$/g, '').toLowerCase();
  if (isIP(host)) {
    const why = addressProblem(host);
    if (why !== null) throw new DestinationError('url_not_allowed', `url points at ${host}, which is not a public address: ${why}.`);
  } else if (host === 'localhost' || host.endsWith('.localhost') || host.endsWith('.local') || host.endsWith('.internal') || !host.includes('.')) {
    throw new DestinationError('url_not_allowed', `url names a local host (${host}).`);
  }
  return u;
}

/**
 * Resolves `url`'s host (bounded by `timeoutMs`, ms) with `resolve` and refuses it when any address
 * is not global unicast. A name that does not resolve is accepted (delivery will record the DNS
 * error and retry).
 * @throws DestinationError `url_not_allowed`
 */
export async function checkResolvedHost(u: URL, allowPrivate: boolean, timeoutMs = 2000, resolve: Resolve = systemResolve): Promise<void> {
  const host = u.hostname.replace(/^\[|\]$/g, '');
  if (allowPrivate || isIP(host)) return;
  const addresses = await new Promise<LookupAddress[]>((done) => {
    const timer = setTimeout(() => done([]), timeoutMs);
    resolve(host, { all: true }, (err, list) => {
      clearTimeout(timer);
      done(err ? [] : list);
    });
  });
  for (const a of addresses) {
    const why = addressProblem(a.address);
    if (why !== null) throw new DestinationError('url_not_allowed', `url resolves to ${a.address}, which is not a public address: ${why}.`);
  }
}

/** The attempt error recorded when delivery-time resolution finds a private address. */
export const DESTINATION_NOT_ALLOWED = 'destination_not_allowed';

/**
 * A `lookup` for http.request that resolves with `resolve` (dns.lookup by default) and fails with
 * code `destination_not_allowed` when any resolved address is not global unicast (unless
 * `allowPrivate`): the address checked is the one the socket connects to.
 */
export function guardedLookup(allowPrivate: boolean, resolve: Resolve = systemResolve): LookupFunction {
  return ((hostname: string, options: { all?: boolean; family?: number; hints?: number }, callback: (...args: unknown[]) => void) => {
    resolve(hostname, { family: options?.family, hints: options?.hints, all: true }, (err, list) => {
      if (err) return callback(err);
      if (!allowPrivate) {
        for (const a of list) {
          const why = addressProblem(a.address);
          if (why === null) continue;
          return callback(Object.assign(new Error(`${hostname} resolves to ${a.address}, which is not a public address: ${why}`), { code: DESTINATION_NOT_ALLOWED }));
        }
      }
      if (options?.all) return callback(null, list);
      const first = list[0];
      if (!first) return callback(Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' }));
      callback(null, first.address, first.family);
    });
  }) as unknown as LookupFunction;
}
