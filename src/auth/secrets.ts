/**
 * Secrets at rest. API keys and stream keys are verified by SHA-256 hash (they are 190+ bit random
 * strings, so a fast hash is the right tool, as for GitHub and Stripe tokens). Stream keys are also
 * kept AES-256-GCM-encrypted under the node's secret (`<dataDir>/secret.key`, 0600) so that a GET by
 * a secret key can show them (PRODUCT.md §2). Owner passwords use scrypt (RFC 7914).
 */
import { createCipheriv, createDecipheriv, createHash, randomBytes, scrypt, timingSafeEqual } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/** SHA-256 of a token (32 bytes). */
export function hashToken(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest();
}

/** Constant-time check of `token` against a stored SHA-256 hash. */
export function tokenMatches(token: string, hash: Buffer): boolean {
  const h = hashToken(token);
  return h.length === hash.length && timingSafeEqual(h, hash);
}

/** Loads the node secret (32 bytes) from `<dataDir>/secret.key`, creating it on first use. */
export function loadNodeSecret(dataDir: string): Buffer {
  const file = path.join(dataDir, 'secret.key');
  if (!existsSync(file)) {
    mkdirSync(dataDir, { recursive: true });
    try {
      writeFileSync(file, randomBytes(32).toString('hex'), { mode: 0o600, flag: 'wx' });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e; // another process made it first
    }
  }
  const key = Buffer.from(readFileSync(file, 'utf8').trim(), 'hex');
  if (key.length !== 32) throw new Error(`${file} is not a 32-byte hex secret`);
  return key;
}

/** AES-256-GCM: iv(12) ‖ tag(16) ‖ ciphertext. */
export function encryptSecret(key: Buffer, plain: string): Buffer {
  const iv = randomBytes(12);
  const c = createCipheriv('aes-256-gcm', key, iv);
  const body = Buffer.concat([c.update(plain, 'utf8'), c.final()]);
  return Buffer.concat([iv, c.getAuthTag(), body]);
}

/** Inverse of encryptSecret. @throws Error when the blob was not made with this key. */
export function decryptSecret(key: Buffer, blob: Buffer): string {
  const d = createDecipheriv('aes-256-gcm', key, blob.subarray(0, 12));
  d.setAuthTag(blob.subarray(12, 28));
  return Buffer.concat([d.update(blob.subarray(28)), d.final()]).toString('utf8');
}

const SCRYPT = { N: 16384, r: 8, p: 1, keylen: 32 };

/** scrypt password hash: `scrypt$N$r$p$salt$hash` (base64url). */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const hash = await scryptAsync(password, salt);
  return `scrypt$${SCRYPT.N}$${SCRYPT.r}$${SCRYPT.p}$${salt.toString('base64url')}$${hash.toString('base64url')}`;
}

/** Constant-time check of a password against a `hashPassword` string. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const parts = stored.split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') return false;
  const salt = Buffer.from(parts[4]!, 'base64url');
  const want = Buffer.from(parts[5]!, 'base64url');
  const got = await scryptAsync(password, salt);
  return got.length === want.length && timingSafeEqual(got, want);
}

function scryptAsync(password: string, salt: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    scrypt(password, salt, SCRYPT.keylen, { N: SCRYPT.N, r: SCRYPT.r, p: SCRYPT.p }, (err, key) => (err ? reject(err) : resolve(key))),
  );
}
