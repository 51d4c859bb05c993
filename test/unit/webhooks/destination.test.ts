/** Destination checks (PRODUCT.md §6, §9): private/loopback/reserved addresses refused; URL form. */
import { describe, expect, it } from 'vitest';
import { checkResolvedHost, checkUrlForm, DestinationError, isPrivateAddress } from '../../../src/webhooks/destination.js';

describe('webhook destinations', () => {
  it('classifies addresses', () => {
    for (const ip of ['127.0.0.1', '127.1.2.3', '10.1.2.3', '172.16.0.1', '172.31.255.255', '192.168.1.1', '169.254.169.254', '100.64.0.1', '0.0.0.0', '224.0.0.1', '255.255.255.255',
      '::1', '::', 'fe80::1', 'fc00::1', 'fd12:3456::1', 'ff02::1', '::ffff:127.0.0.1', '::ffff:7f00:1', '::ffff:10.0.0.1', '64:ff9b::a9fe:a9fe', '[::1]', 'not-an-ip']) {
      expect(isPrivateAddress(ip), ip).toBe(true);
    }
    for (const ip of ['8.8.8.8', '1.1.1.1', '172.32.0.1', '93.184.216.34', '2606:4700:4700::1111', '::ffff:8.8.8.8']) {
      expect(isPrivateAddress(ip), ip).toBe(false);
    }
  });

  it('refuses private hosts at create unless allowed, and bad URL forms always', async () => {
    const code = (f: () => unknown) => {
      try {
        f();
        return 'ok';
      } catch (e) {
        return (e as DestinationError).code;
      }
    };
    for (const u of ['http://127.0.0.1:9/x', 'http://localhost/', 'http://api.localhost/', 'http://[::1]:80/', 'http://10.0.0.8/', 'https://169.254.169.254/latest', 'http://intranet/', 'http://0x7f000001/', 'http://2130706433/']) {
      expect(code(() => checkUrlForm(u, false)), u).toBe('url_not_allowed');
      expect(code(() => checkUrlForm(u, true)), u).toBe('ok');
    }
    for (const u of ['ftp://example.com/', 'not a url', 'http://user:pw@example.com/', `https://example.com/${'a'.repeat(2100)}`]) {
      expect(code(() => checkUrlForm(u, true)), u).toBe('url_invalid');
    }
    expect(code(() => checkUrlForm('https://hooks.example.com/skylark', false))).toBe('ok');
    // A name resolving to loopback is refused after resolution (localhost.localdomain-style names via /etc/hosts).
    await expect(checkResolvedHost(new URL('http://localhost/'), false)).rejects.toThrow(DestinationError);
    await expect(checkResolvedHost(new URL('http://localhost/'), true)).resolves.toBeUndefined();
  });
});
