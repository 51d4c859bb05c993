/**
 * Where webhooks may be sent (PRODUCT.md §6, §9): `http(s)://` URLs without credentials; private,
 * loopback, link-local, multicast and reserved addresses are refused — at create time (400
 * `url_not_allowed`, for IP literals, `localhost` names and names that resolve to such addresses)
 * and again at delivery time, after DNS resolution, on the very address the socket connects to (a
 * `lookup` hook, so DNS rebinding cannot slip between check and connect). The operator may allow them
 * (`SKYLARK_WEBHOOKS_ALLOW_PRIVATE=1`; tests do).
 */
import { BlockList, isIP, type LookupFunction } from 'node:net';
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';

const blocked = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12],
  ['192.0.0.0', 24], ['192.0.2.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15], ['198.51.100.0', 24], ['203.0.113.0', 24],
  ['224.0.0.0', 4], ['240.0.0.0', 4],
] as const) blocked.addSubnet(net, prefix, 'ipv4');
for (const [net, prefix] of [
  ['::', 128], ['::1', 128], ['fc00::', 7], ['fe80::', 10], ['fec0::', 10], ['ff00::', 8], ['2001:db8::', 32], ['100::', 64],
] as const) blocked.addSubnet(net, prefix, 'ipv6');

/** The IPv4 address inside an IPv4-mapped (`::ffff:a.b.c.d`), IPv4-compatible or NAT64 (`64:ff9b::/96`) IPv6 address. */
function embeddedIpv4(ip: string): string | null {
  const m = /^(?:::ffff:|::|64:ff9b::)(?:0:)?(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  if (m) return m[1]!;
  const hex = /^(?:::ffff:|64:ff9b::)([0-9a-f]{1,4}):([0-9a-f]{1,4})$/i.exec(ip);
  if (hex) {
    const hi = parseInt(hex[1]!, 16);
    const lo = parseInt(hex[2]!, 16);
    return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  }
  return null;
}

/** Whether `ip` (v4 or v6 literal) is private, loopback, link-local, multicast or reserved. Non-IPs → true. */
export function isPrivateAddress(ip: string): boolean {
  const bare = ip.replace(/^\[|\]$/g, '').replace(/%.*$/, '');
  const family = isIP(bare);
  if (family === 4) return blocked.check(bare, 'ipv4');
  if (family === 6) {
    const v4 = embeddedIpv4(bare);
    if (v4 !== null && isIP(v4) === 4) return blocked.check(v4, 'ipv4');
    return blocked.check(bare, 'ipv6');
  }
  return true;
}

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
    if (isPrivateAddress(host)) throw new DestinationError('url_not_allowed', `url points at a private or loopback address (${host}).`);
  } else if (host === 'localhost' || host.endsWith('.localhost') || host.endsWith('.local') || host.endsWith('.internal') || !host.includes('.')) {
    throw new DestinationError('url_not_allowed', `url names a local host (${host}).`);
  }
  return u;
}

/**
 * Resolves `url`'s host (bounded by `timeoutMs`) and refuses it when any address is private.
 * A name that does not resolve is accepted (delivery will record the DNS error and retry).
 * @throws DestinationError `url_not_allowed`
 */
export async function checkResolvedHost(u: URL, allowPrivate: boolean, timeoutMs = 2000): Promise<void> {
  const host = u.hostname.replace(/^\[|\]$/g, '');
  if (allowPrivate || isIP(host)) return;
  const addresses = await new Promise<LookupAddress[]>((resolve) => {
    const timer = setTimeout(() => resolve([]), timeoutMs);
    dnsLookup(host, { all: true }, (err, list) => {
      clearTimeout(timer);
      resolve(err ? [] : list);
    });
  });
  const bad = addresses.find((a) => isPrivateAddress(a.address));
  if (bad) throw new DestinationError('url_not_allowed', `url resolves to a private or loopback address (${bad.address}).`);
}

/** The attempt error recorded when delivery-time resolution finds a private address. */
export const DESTINATION_NOT_ALLOWED = 'destination_not_allowed';

/**
 * A `lookup` for http.request that resolves like dns.lookup and fails with code
 * `destination_not_allowed` when any resolved address is private (unless `allowPrivate`).
 */
export function guardedLookup(allowPrivate: boolean): LookupFunction {
  return ((hostname: string, options: { all?: boolean; family?: number }, callback: (...args: unknown[]) => void) => {
    dnsLookup(hostname, { ...options, all: true } as { all: true }, (err, list) => {
      if (err) return callback(err);
      if (!allowPrivate) {
        const bad = list.find((a) => isPrivateAddress(a.address));
        if (bad) {
          const e = Object.assign(new Error(`${hostname} resolves to a private or loopback address (${bad.address})`), { code: DESTINATION_NOT_ALLOWED });
          return callback(e);
        }
      }
      if (options?.all) return callback(null, list);
      const first = list[0];
      if (!first) return callback(Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' }));
      callback(null, first.address, first.family);
    });
  }) as unknown as LookupFunction;
}
