/**
 * Where a listener or a downloader is (docs/behaviour.md §4): a client address (src/base/http/client-address.ts)
 * mapped to an ISO 3166-1 alpha-2 country with the GeoLite2 Country data shipped in `geoip-country` (no runtime
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

/** ISO 3166-1 alpha-2 country of a public address, else null (private, loopback, unknown). */
export function countryOf(ip: string): string | null {
  const family = isIP(ip);
  if (!family) return null;
  if (NON_PUBLIC.check(ip, family === 4 ? 'ipv4' : 'ipv6')) return null;
  return db().lookup(ip)?.country ?? null;
}
