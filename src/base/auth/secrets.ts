/**
 * Secrets at rest. API keys and stream keys are verified by SHA-256 hash (they are 190+ bit random
 * strings, so a fast hash is the right tool, as for GitHub and Stripe tokens). Stream keys are also
 * kept AES-256-GCM-encrypted under the node's secret (`<dataDir>/secret.key`, 0600) so that a GET by
 * a secret key can show them (docs/behaviour.md §2). Owner passwords use scrypt (RFC 7914) at OWASP's cost.
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

/**
 * The scrypt cost of new password hashes (RFC 7914): OWASP Password Storage Cheat Sheet, N = 2^17,
 * r = 8, p = 1. One hash takes 128 · N · r = 128 MiB and ~0.36 s of one core (docs/decisions.md
 * "Owner passwords").
 */
export const SCRYPT_COST = { N: 2 ** 17, r: 8, p: 1 } as const;
/** Derived key bytes. */
const SCRYPT_KEYLEN = 32;
/** Most memory a stored hash's parameters may ask for (bytes): bounds what one verification holds. */
const SCRYPT_MAX_MEMORY_BYTES = 256 * 1024 * 1024;
/** Password hashes computed at once; the rest wait (each holds 128 MiB and a libuv pool thread). */
export const PASSWORD_HASH_CONCURRENCY = 2;
/** Password hashes waiting for a turn at most; beyond, `PasswordHashBusyError`. */
export const PASSWORD_HASH_QUEUE = 32;

/** The node is already computing (and queueing) as many password hashes as it takes. */
export class PasswordHashBusyError extends Error {
  constructor() {
    super('too many password checks at once');
    this.name = 'PasswordHashBusyError';
  }
}

interface ScryptHash {
  N: number;
  r: number;
  p: number;
  salt: Buffer;
  hash: Buffer;
}

/** Bytes scrypt needs for N, r, p (what OpenSSL checks against `maxmem`: 128·r·(N + 2) + 128·r·p). */
const scryptMemory = (N: number, r: number, p: number) => 128 * r * (N + 2 + p);

/** Parses `scrypt$N$r$p$salt$hash`; null when malformed or asking for more than SCRYPT_MAX_MEMORY_BYTES. */
function parseHash(stored: string): ScryptHash | null {
  const parts = stored.split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') return null;
  const [N, r, p] = [Number(parts[1]), Number(parts[2]), Number(parts[3])];
  if (![N, r, p].every((x) => Number.isSafeInteger(x) && x >= 1) || N < 2 || (N & (N - 1)) !== 0) return null;
  if (scryptMemory(N, r, p) > SCRYPT_MAX_MEMORY_BYTES || p > 16) return null;
  const salt = Buffer.from(parts[4]!, 'base64url');
  const hash = Buffer.from(parts[5]!, 'base64url');
  if (salt.length < 8 || hash.length < 16) return null;
  return { N, r, p, salt, hash };
}

/**
 * scrypt password hash at SCRYPT_COST: `scrypt$N$r$p$salt$hash` (salt 16 bytes, hash 32 bytes,
 * base64url). The parameters travel with the hash, so a later cost change keeps old hashes verifiable.
 * @throws PasswordHashBusyError when PASSWORD_HASH_QUEUE hashes already wait
 */
export async function hashPassword(password: string): Promise<string> {
  const { N, r, p } = SCRYPT_COST;
  const salt = randomBytes(16);
  const hash = await scryptAsync(password, salt, N, r, p, SCRYPT_KEYLEN);
  return `scrypt$${N}$${r}$${p}$${salt.toString('base64url')}$${hash.toString('base64url')}`;
}

/**
 * Constant-time check of a password against a `hashPassword` string, with the N, r, p stored in it.
 * A malformed hash, or one asking for more than 256 MiB, never matches.
 * @throws PasswordHashBusyError when PASSWORD_HASH_QUEUE hashes already wait
 */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const h = parseHash(stored);
  if (!h) return false;
  const got = await scryptAsync(password, h.salt, h.N, h.r, h.p, h.hash.length);
  return timingSafeEqual(got, h.hash);
}

/** Whether a stored hash was made with other parameters than SCRYPT_COST (rehash it at the next login). */
export function needsRehash(stored: string): boolean {
  const h = parseHash(stored);
  return !h || h.N !== SCRYPT_COST.N || h.r !== SCRYPT_COST.r || h.p !== SCRYPT_COST.p || h.hash.length !== SCRYPT_KEYLEN;
}

let running = 0;
const waiting: Array<() => void> = [];

/** Runs scrypt when one of PASSWORD_HASH_CONCURRENCY slots is free. */
async function scryptAsync(password: string, salt: Buffer, N: number, r: number, p: number, keylen: number): Promise<Buffer> {
  if (running >= PASSWORD_HASH_CONCURRENCY) {
    if (waiting.length >= PASSWORD_HASH_QUEUE) throw new PasswordHashBusyError();
    await new Promise<void>((resolve) => waiting.push(resolve));
  } else running++;
  try {
    return await new Promise<Buffer>((resolve, reject) =>
      scrypt(password, salt, keylen, { N, r, p, maxmem: scryptMemory(N, r, p) }, (err, key) => (err ? reject(err) : resolve(key))),
    );
  } finally {
    const next = waiting.shift();
    if (next) next(); // the slot passes on: `running` stays
    else running--;
  }
}
