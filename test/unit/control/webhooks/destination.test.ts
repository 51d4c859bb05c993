/**
 * Destination checks (docs/behaviour.md §6, §9, docs/webhooks.md "Destinations"): only global unicast
 * addresses, judged at create (the URL's literal, then the name's DNS answers) and at delivery (the
 * `lookup` of the very socket that would connect); URL form.
 */
import { describe, expect, it } from 'vitest';
import http from 'node:http';
import {
  addressProblem,
  checkResolvedHost,
  checkUrlForm,
  DESTINATION_NOT_ALLOWED,
  DestinationError,
  guardedLookup,
  ipv6Bytes,
  isPrivateAddress,
  type Resolve,
} from '../../../../src/control/webhooks/destination.js';

/** One address per refused range, with the range it stands for. */
const REFUSED: Array<[string, string]> = [
  ['0.1.2.3', '0.0.0.0/8 "this network"'],
  ['0.0.0.0', '0.0.0.0/8 "this network"'],
  ['10.1.2.3', '10.0.0.0/8 private'],
  ['100.64.0.1', '100.64.0.0/10 CGNAT'],
  ['100.127.255.254', '100.64.0.0/10 CGNAT'],
  ['127.0.0.1', '127.0.0.0/8 loopback'],
  ['127.1.2.3', '127.0.0.0/8 loopback'],
  ['169.254.169.254', '169.254.0.0/16 link-local'],
  ['172.16.0.1', '172.16.0.0/12 private'],
  ['172.31.255.255', '172.16.0.0/12 private'],
  ['192.0.0.8', '192.0.0.0/24 IETF protocol assignments'],
  ['192.0.2.1', '192.0.2.0/24 documentation'],
  ['192.31.196.1', '192.31.196.0/24 AS112-v4'],
  ['192.52.193.1', '192.52.193.0/24 AMT'],
  ['192.88.99.1', '192.88.99.0/24 6to4 relay anycast'],
  ['192.168.1.1', '192.168.0.0/16 private'],
  ['192.175.48.1', '192.175.48.0/24 AS112 direct delegation'],
  ['198.18.0.1', '198.18.0.0/15 benchmarking'],
  ['198.19.255.255', '198.18.0.0/15 benchmarking'],
  ['198.51.100.7', '198.51.100.0/24 documentation'],
  ['203.0.113.7', '203.0.113.0/24 documentation'],
  ['224.0.0.1', '224.0.0.0/4 multicast'],
  ['239.255.255.250', '224.0.0.0/4 multicast'],
  ['240.0.0.1', '240.0.0.0/4 reserved'],
  ['255.255.255.255', 'broadcast'],
  ['::', '::/128 unspecified'],
  ['::1', '::1/128 loopback'],
  ['::127.0.0.1', '::/96 IPv4-compatible (loopback inside)'],
  ['::8.8.8.8', '::/96 IPv4-compatible (deprecated, refused whatever is inside)'],
  ['::ffff:127.0.0.1', '::ffff:0:0/96 IPv4-mapped loopback'],
  ['::ffff:7f00:1', '::ffff:0:0/96 IPv4-mapped loopback (hex)'],
  ['::ffff:10.0.0.1', '::ffff:0:0/96 IPv4-mapped private'],
  ['::ffff:0:7f00:1', '::ffff:0:0:0/96 IPv4-translated (SIIT)'],
  ['64:ff9b::a9fe:a9fe', '64:ff9b::/96 NAT64 with link-local inside'],
  ['64:ff9b::10.0.0.1', '64:ff9b::/96 NAT64 with private inside'],
  ['64:ff9b::7f00:1', '64:ff9b::/96 NAT64 with loopback inside'],
  ['64:ff9b:1::808:808', '64:ff9b:1::/48 local-use NAT64'],
  ['100::1', '100::/64 discard-only'],
  ['2001:0:4136:e378:8000:63bf:3fff:fdd2', '2001::/32 Teredo'],
  ['2001:2::1', '2001:2::/48 benchmarking'],
  ['2001:10::1', '2001:10::/28 ORCHID'],
  ['2001:20::1', '2001:20::/28 ORCHIDv2'],
  ['2001:1ff:ffff::1', '2001::/23 IETF protocol assignments'],
  ['2001:db8::1', '2001:db8::/32 documentation'],
  ['2002:7f00:1::1', '2002::/16 6to4 (loopback inside)'],
  ['2002:808:808::1', '2002::/16 6to4 (refused whatever is inside)'],
  ['2620:4f:8000::1', '2620:4f:8000::/48 AS112 direct delegation'],
  ['3fff::1', '3fff::/20 documentation'],
  ['3fff:fff:ffff::1', '3fff::/20 documentation'],
  ['4000::1', 'outside 2000::/3'],
  ['5f00::1', '5f00::/16 SRv6 SIDs (outside 2000::/3)'],
  ['fc00::1', 'fc00::/7 unique local'],
  ['fd12:3456::1', 'fc00::/7 unique local'],
  ['fe80::1', 'fe80::/10 link-local'],
  ['fe80::1%eth0', 'fe80::/10 link-local with a zone'],
  ['fec0::1', 'fec0::/10 site-local (deprecated)'],
  ['ff02::1', 'ff00::/8 multicast'],
  ['ff0e::1', 'ff00::/8 multicast'],
];

/** Global unicast addresses, allowed. */
const ALLOWED = [
  '8.8.8.8', '1.1.1.1', '93.184.216.34', '100.63.255.255', '100.128.0.1', '172.15.255.255', '172.32.0.1', '192.0.1.1', '198.17.255.255',
  '198.20.0.1', '223.255.255.254', '2606:4700:4700::1111', '2a00:1450:4001:80b::200e', '2001:4860:4860::8888', '2001:200::1', '2003::1',
  '::ffff:8.8.8.8', '::ffff:808:808', '64:ff9b::8.8.8.8', '64:ff9b::808:808',
];

/** A resolver that answers every name with `addresses` (what a hostile DNS server could answer). */
const answering = (...addresses: string[]): Resolve => (_host, _opts, cb) =>
  setImmediate(() => cb(null, addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }))));

const code = (f: () => unknown) => {
  try {
    f();
    return 'ok';
  } catch (e) {
    return (e as DestinationError).code;
  }
};

const urlOf = (ip: string) => (ip.includes(':') ? `http://[${ip.replace(/%.*$/, '')}]:8080/hook` : `http://${ip}:8080/hook`);

describe('webhook destinations: addresses', () => {
  it('parses IPv6 text forms to 16 bytes', () => {
    expect([...ipv6Bytes('::ffff:1.2.3.4')!]).toEqual([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 255, 255, 1, 2, 3, 4]);
    expect([...ipv6Bytes('2001:db8::8:1')!]).toEqual([0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 8, 0, 1]);
    expect([...ipv6Bytes('1:2:3:4:5:6:7:8')!]).toEqual([0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7, 0, 8]);
    expect([...ipv6Bytes('::')!]).toEqual(new Array(16).fill(0));
    expect(ipv6Bytes('1.2.3.4')).toBeNull();
    expect(ipv6Bytes('not-an-ip')).toBeNull();
  });

  it.each(REFUSED)('refuses %s (%s)', (ip) => {
    expect(addressProblem(ip)).not.toBeNull();
    expect(isPrivateAddress(ip)).toBe(true);
  });

  it.each(ALLOWED)('allows %s', (ip) => {
    expect(addressProblem(ip)).toBeNull();
    expect(isPrivateAddress(ip)).toBe(false);
  });

  it('refuses what is not an IP literal; brackets are accepted', () => {
    expect(isPrivateAddress('not-an-ip')).toBe(true);
    expect(isPrivateAddress('[::1]')).toBe(true);
    expect(isPrivateAddress('[2606:4700:4700::1111]')).toBe(false);
  });
});

describe('webhook destinations: at create', () => {
  it.each(REFUSED)('a URL naming %s (%s) → url_not_allowed; allowed when the operator allows private', (ip) => {
    if (ip.includes('%')) return; // a zone is not part of a URL host
    expect(code(() => checkUrlForm(urlOf(ip), false))).toBe('url_not_allowed');
    expect(code(() => checkUrlForm(urlOf(ip), true))).toBe('ok');
  });

  it.each(REFUSED)('a name resolving to %s (%s) → url_not_allowed', async (ip) => {
    const u = checkUrlForm('https://hooks.example.com/skylark', false);
    await expect(checkResolvedHost(u, false, 2000, answering('93.184.216.34', ip))).rejects.toMatchObject({ code: 'url_not_allowed' });
    await expect(checkResolvedHost(u, true, 2000, answering(ip))).resolves.toBeUndefined();
  });

  it('global unicast literals and names pass', async () => {
    for (const ip of ALLOWED) expect(code(() => checkUrlForm(urlOf(ip), false)), ip).toBe('ok');
    await expect(checkResolvedHost(new URL('https://hooks.example.com/'), false, 2000, answering(...ALLOWED))).resolves.toBeUndefined();
  });

  it('refuses local names and bad URL forms', async () => {
    for (const u of ['http://localhost/', 'http://api.localhost/', 'http://intranet/', 'http://0x7f000001/', 'http://2130706433/', 'http://[::ffff:127.0.0.1]/']) {
      expect(code(() => checkUrlForm(u, false)), u).toBe('url_not_allowed');
      expect(code(() => checkUrlForm(u, true)), u).toBe('ok');
    }
    for (const u of ['ftp://example.com/', 'not a url', 'http://user:pw@example.com/', `https://example.com/${'a'.repeat(2100)}`]) {
      expect(code(() => checkUrlForm(u, true)), u).toBe('url_invalid');
    }
    expect(code(() => checkUrlForm('https://hooks.example.com/skylark', false))).toBe('ok');
    // The system resolver: localhost resolves to loopback and is refused after resolution.
    await expect(checkResolvedHost(new URL('http://localhost/'), false)).rejects.toThrow(DestinationError);
    await expect(checkResolvedHost(new URL('http://localhost/'), true)).resolves.toBeUndefined();
  });
});

describe('webhook destinations: at delivery, after DNS resolution', () => {
  /** What `http.request` does with the guarded lookup: the error code, or the address it would connect to. */
  const deliver = (lookup: ReturnType<typeof guardedLookup>) =>
    new Promise<string>((resolve) => {
      const req = http.request('http://hooks.example.com:9/hook', { method: 'POST', lookup, agent: false });
      req.on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? e.message));
      req.on('socket', (s) => s.on('lookup', (err, address) => err === null && (resolve(`connect ${address}`), req.destroy())));
      req.end('{}');
    });

  it.each(REFUSED)('a name resolving to %s (%s) is refused before connecting', async (ip) => {
    expect(await deliver(guardedLookup(false, answering(ip)))).toBe(DESTINATION_NOT_ALLOWED);
    // Rebinding: one public and one refused address in the same answer is refused too.
    expect(await deliver(guardedLookup(false, answering('8.8.8.8', ip)))).toBe(DESTINATION_NOT_ALLOWED);
  });

  it('global unicast answers go through to the socket', async () => {
    for (const ip of ['8.8.8.8', '2606:4700:4700::1111', '64:ff9b::808:808']) {
      expect(await deliver(guardedLookup(false, answering(ip))), ip).toBe(`connect ${ip}`);
    }
    expect(await deliver(guardedLookup(true, answering('127.0.0.1')))).toBe('connect 127.0.0.1');
  });
});
