/**
 * The OAuth endpoints' per-IP rate limit (docs/api-platform.md) keys a client by its address group
 * (docs/listeners.md "Per-address caps"): the addresses of one IPv6 /64 share one limit, another
 * /64 has its own, and an IPv4-mapped IPv6 peer is its IPv4 address.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { Guard } from '../../../../src/base/auth/guard.js';
import { openDatabase } from '../../../../src/base/db/database.js';
import { AccountsRepo } from '../../../../src/base/db/accounts-repo.js';
import { OAuthRepo } from '../../../../src/base/db/oauth-repo.js';
import type { PublicUrls } from '../../../../src/base/config.js';
import { tempDir } from '../../../helpers/server.js';

const { dir, cleanup } = tempDir('skylark-oauth-ip-');
const db = openDatabase(dir);
afterAll(() => {
  db.close();
  cleanup();
});

describe('OAuth per-IP rate limit', () => {
  it('counts an IPv6 /64 as one client', () => {
    const urls = (): PublicUrls => ({ baseUrl: 'http://x/v2', authUrl: 'http://x', ingestUrl: 'x', icecastUrl: 'x', cdnUrl: 'http://x' });
    const guard = new Guard(new AccountsRepo(db), { oauth: new OAuthRepo(db), nodeSecret: Buffer.alloc(32, 1), urls, trustedProxies: ['127.0.0.1'], limits: { oauthPerIp: 2 } });
    const take = (peer: string, xff = '') => guard.limitClient(peer, xff, {});
    expect(take('127.0.0.1', '2001:db8:1:2::1')).toBe(true);
    expect(take('127.0.0.1', '2001:db8:1:2::2')).toBe(true);
    expect(take('127.0.0.1', '2001:db8:1:2:ffff::3')).toBe(false); // the same /64
    expect(take('2001:db8:1:2::4')).toBe(false); // as a direct peer too
    expect(take('127.0.0.1', '2001:db8:1:3::1')).toBe(true); // another /64
    expect(take('::ffff:192.0.2.7')).toBe(true);
    expect(take('192.0.2.7')).toBe(true);
    expect(take('192.0.2.7')).toBe(false);
  });
});
