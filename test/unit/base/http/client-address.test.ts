/**
 * The client address of a request (src/base/http/client-address.ts): one parser of
 * `SKYLARK_TRUSTED_PROXIES`, which refuses a bad entry by name (the configuration then refuses to
 * start), one address normalisation, and the walk of `X-Forwarded-For` from the right.
 */
import { describe, expect, it } from 'vitest';
import { clientAddress, isTrustedProxy, normalizeIp, trustedProxies } from '../../../../src/base/http/client-address.js';
import { ConfigError, loadConfig, parseTrustedProxyList } from '../../../../src/base/config.js';

describe('normalizeIp', () => {
  it('gives the one form every cap and rate limit keys on', () => {
    expect(normalizeIp('::ffff:192.0.2.7')).toBe('192.0.2.7');
    expect(normalizeIp('::FFFF:192.0.2.7')).toBe('192.0.2.7');
    expect(normalizeIp(' [2001:db8::1] ')).toBe('2001:db8::1');
    expect(normalizeIp('fe80::1%eth0')).toBe('fe80::1');
    expect(normalizeIp('0000:0000:0000:0000:0000:0000:0000:0001')).toBe('0000:0000:0000:0000:0000:0000:0000:0001');
    expect(normalizeIp('unknown')).toBe('');
    expect(normalizeIp('')).toBe('');
  });
});

describe('trusted proxies', () => {
  it('takes CIDRs and bare addresses of both families', () => {
    const list = trustedProxies(['10.0.0.0/8', '::1', '2001:db8::/32', '192.0.2.1']);
    expect(isTrustedProxy(list, '10.1.2.3')).toBe(true);
    expect(isTrustedProxy(list, '::ffff:10.1.2.3')).toBe(true);
    expect(isTrustedProxy(list, '::1')).toBe(true);
    expect(isTrustedProxy(list, '2001:db8:5::9')).toBe(true);
    expect(isTrustedProxy(list, '192.0.2.1')).toBe(true);
    expect(isTrustedProxy(list, '192.0.2.2')).toBe(false);
    expect(isTrustedProxy(list, 'garbage')).toBe(false);
    expect(isTrustedProxy(trustedProxies([]), '10.0.0.1')).toBe(false);
  });

  it('refuses a bad entry by name instead of skipping it', () => {
    for (const bad of ['garbage', '10.0.0.0/33', '::1/129', '10.0.0.0/', '10.0.0.0/-1', '10.0.0.0/8.5', 'example.com/8']) {
      expect(() => trustedProxies(['192.168.0.0/16', bad]), bad).toThrow(`trusted proxy '${bad}'`);
    }
  });

  it('stops the configuration with the setting and the entry named', () => {
    expect(parseTrustedProxyList(' 10.0.0.0/8 , ,::1/128 ')).toEqual(['10.0.0.0/8', '::1/128']);
    expect(() => parseTrustedProxyList('10.0.0.0/8,garbage')).toThrow(ConfigError);
    expect(() => loadConfig({ SKYLARK_TRUSTED_PROXIES: '10.0.0.0/8,garbage' })).toThrow(/SKYLARK_TRUSTED_PROXIES.*'garbage'/);
    expect(loadConfig({ SKYLARK_TRUSTED_PROXIES: '10.0.0.0/8' }).trustedProxies).toEqual(['10.0.0.0/8']);
  });
});

describe('clientAddress', () => {
  const trusted = trustedProxies(['10.0.0.0/8', '::1']);

  it('trusts X-Forwarded-For only from configured proxies', () => {
    expect(clientAddress('203.0.113.9', '198.51.100.1', trusted)).toBe('203.0.113.9');
    expect(clientAddress('10.1.2.3', '198.51.100.1, 10.0.0.7', trusted)).toBe('198.51.100.1');
    expect(clientAddress('::1', '198.51.100.1', trusted)).toBe('198.51.100.1');
    expect(clientAddress('::ffff:10.1.2.3', '198.51.100.1', trusted)).toBe('198.51.100.1');
    expect(clientAddress('10.1.2.3', '', trusted)).toBe('10.1.2.3');
  });

  it('answers the normalised form, the leftmost hop when all are trusted, the last good one before garbage', () => {
    expect(clientAddress('::ffff:203.0.113.9', '', trusted)).toBe('203.0.113.9');
    expect(clientAddress('10.1.2.3', '10.0.0.9, 10.0.0.8', trusted)).toBe('10.0.0.9');
    expect(clientAddress('10.1.2.3', '198.51.100.1, nonsense, 10.0.0.8', trusted)).toBe('10.0.0.8');
    expect(clientAddress('10.1.2.3', '::ffff:198.51.100.4', trusted)).toBe('198.51.100.4');
  });
});
