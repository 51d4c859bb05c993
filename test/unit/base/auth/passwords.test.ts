/**
 * Owner password hashes (src/base/auth/secrets.ts): scrypt at OWASP's cost (N=2^17, r=8, p=1), the
 * parameters in the hash string so hashes of an older cost still verify, `needsRehash` for the
 * upgrade at login, and bounded work for a hostile stored string.
 */
import { describe, expect, it } from 'vitest';
import { randomBytes, scryptSync } from 'node:crypto';
import { hashPassword, needsRehash, PASSWORD_HASH_CONCURRENCY, PASSWORD_HASH_QUEUE, PasswordHashBusyError, SCRYPT_COST, verifyPassword } from '../../../../src/base/auth/secrets.js';

const oldHash = (password: string, N = 16384) => {
  const salt = randomBytes(16);
  return `scrypt$${N}$8$1$${salt.toString('base64url')}$${scryptSync(password, salt, 32, { N, r: 8, p: 1 }).toString('base64url')}`;
};

describe('password hashes', () => {
  it('new hashes use N=2^17, r=8, p=1 and verify', async () => {
    expect(SCRYPT_COST).toEqual({ N: 131072, r: 8, p: 1 });
    const h = await hashPassword('pw one');
    expect(h).toMatch(/^scrypt\$131072\$8\$1\$[A-Za-z0-9_-]{22}\$[A-Za-z0-9_-]{43}$/);
    expect(await verifyPassword('pw one', h)).toBe(true);
    expect(await verifyPassword('pw two', h)).toBe(false);
    expect(needsRehash(h)).toBe(false);
  });

  it('a hash of the old cost (N=2^14) verifies with its own parameters and asks for a rehash', async () => {
    const h = oldHash('old password');
    expect(await verifyPassword('old password', h)).toBe(true);
    expect(await verifyPassword('other', h)).toBe(false);
    expect(needsRehash(h)).toBe(true);
  });

  it('malformed or oversized parameters never match and cost nothing', async () => {
    const good = oldHash('x');
    const [, , , , salt, hash] = good.split('$');
    for (const bad of [
      'plain',
      `bcrypt$16384$8$1$${salt}$${hash}`,
      `scrypt$16383$8$1$${salt}$${hash}`, // N not a power of two
      `scrypt$1048576$8$1$${salt}$${hash}`, // 1 GiB
      `scrypt$16384$8$1000$${salt}$${hash}`,
      `scrypt$16384$0$1$${salt}$${hash}`,
      `scrypt$16384$8$1$$${hash}`,
    ]) {
      expect(await verifyPassword('x', bad), bad).toBe(false);
      expect(needsRehash(bad)).toBe(true);
    }
  });

  it(`computes at most ${PASSWORD_HASH_CONCURRENCY} at once and queues at most ${PASSWORD_HASH_QUEUE}; beyond, PasswordHashBusyError`, async () => {
    const h = oldHash('q', 1024);
    const all = Array.from({ length: PASSWORD_HASH_CONCURRENCY + PASSWORD_HASH_QUEUE + 5 }, () => verifyPassword('q', h).then(
      (ok) => (ok ? 'ok' : 'wrong'),
      (e: unknown) => (e instanceof PasswordHashBusyError ? 'busy' : String(e)),
    ));
    const results = await Promise.all(all);
    expect(results.filter((r) => r === 'ok')).toHaveLength(PASSWORD_HASH_CONCURRENCY + PASSWORD_HASH_QUEUE);
    expect(results.filter((r) => r === 'busy')).toHaveLength(5);
    expect(await verifyPassword('q', h)).toBe(true); // slots come back
  });
});
