/**
 * Access tokens (src/base/auth/jwt.ts): signed by jose with RS256 and a `kid`, verified synchronously by
 * node:crypto; checked here against jose's own verifier (an independent implementation) and
 * against tampering, algorithm confusion, foreign keys, wrong issuer/audience and expiry.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { SignJWT, createLocalJWKSet, generateKeyPair, jwtVerify } from 'jose';
import { openDatabase, type Database } from '../../../../src/base/db/database.js';
import { OAuthRepo } from '../../../../src/base/db/oauth-repo.js';
import { AccessTokens } from '../../../../src/base/auth/jwt.js';
import { tempDir } from '../../../helpers/server.js';

const tmp = tempDir('skylark-jwt-');
let db: Database;
let t = 1_800_000_000_000;
let tokens: AccessTokens;
const secret = randomBytes(32);
const ISS = 'https://auth.example';
const AUD = 'https://api.example/v2';

beforeAll(async () => {
  db = openDatabase(tmp.dir);
  tokens = new AccessTokens(new OAuthRepo(db), secret, () => ISS, () => AUD, () => t);
  await tokens.ensureKey();
});
afterAll(() => {
  db.close();
  tmp.cleanup();
});

const claims = { accountId: 'acct_1', clientId: 'client_1', scope: 'streams:read', grantId: 'grant_1' };
const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');

describe('AccessTokens', () => {
  it('signs RFC 9068 tokens that jose verifies against the published JWKS', async () => {
    const { token, expiresIn } = await tokens.sign(claims);
    expect(expiresIn).toBe(3600);
    const { payload, protectedHeader } = await jwtVerify(token, createLocalJWKSet(tokens.jwks() as any), {
      issuer: ISS,
      audience: AUD,
      typ: 'at+jwt',
      algorithms: ['RS256'],
      currentDate: new Date(t),
    });
    expect(protectedHeader.kid).toBe(tokens.jwks().keys[0]!.kid);
    expect(payload).toMatchObject({ sub: 'acct_1', client_id: 'client_1', scope: 'streams:read', gid: 'grant_1', iat: t / 1000, exp: t / 1000 + 3600 });
    expect(tokens.verify(token)).toMatchObject({ ok: true, claims: { sub: 'acct_1' } });
  });

  it('keeps the key across instances (restart) and publishes no private parts', async () => {
    const again = new AccessTokens(new OAuthRepo(db), secret, () => ISS, () => AUD, () => t);
    await again.ensureKey();
    const { token } = await again.sign(claims);
    expect(tokens.verify(token).ok).toBe(true);
    expect(again.jwks().keys).toHaveLength(1);
    for (const k of Object.keys(again.jwks().keys[0]!)) expect(['kty', 'n', 'e', 'kid', 'alg', 'use']).toContain(k);
    const row = db.prepare('SELECT private_enc FROM signing_keys').get() as { private_enc: Buffer };
    expect(row.private_enc.toString('latin1')).not.toMatch(/"d":/);
  });

  it('expiry: valid until exp, then `expired` (also from the cache)', async () => {
    const { token } = await tokens.sign(claims);
    t += 3599_999;
    expect(tokens.verify(token).ok).toBe(true);
    t += 1;
    expect(tokens.verify(token)).toEqual({ ok: false, reason: 'expired' });
    expect(tokens.verify(token, true).ok).toBe(true);
  });

  it('refuses tampering, alg none/HS256 confusion, foreign keys, other issuers and audiences', async () => {
    const { token } = await tokens.sign(claims);
    const [h, p, s] = token.split('.') as [string, string, string];
    const payload = JSON.parse(Buffer.from(p, 'base64url').toString());
    const header = JSON.parse(Buffer.from(h, 'base64url').toString());
    expect(tokens.verify(`${h}.${b64({ ...payload, scope: 'streams:write' })}.${s}`)).toMatchObject({ ok: false, reason: 'signature' });
    expect(tokens.verify(`${b64({ ...header, alg: 'none' })}.${p}.`).ok).toBe(false);
    // HS256 "signed" with the public key as the secret (the classic confusion).
    const pub = JSON.stringify(tokens.jwks().keys[0]);
    const hs = await new SignJWT(payload).setProtectedHeader({ alg: 'HS256', kid: header.kid, typ: 'at+jwt' }).sign(new TextEncoder().encode(pub));
    expect(tokens.verify(hs).ok).toBe(false);
    // A real RS256 token from another key claiming our kid.
    const other = await generateKeyPair('RS256');
    const foreign = await new SignJWT(payload).setProtectedHeader({ alg: 'RS256', kid: header.kid, typ: 'at+jwt' }).sign(other.privateKey);
    expect(tokens.verify(foreign)).toMatchObject({ ok: false, reason: 'signature' });
    const unknownKid = await new SignJWT(payload).setProtectedHeader({ alg: 'RS256', kid: 'nope', typ: 'at+jwt' }).sign(other.privateKey);
    expect(tokens.verify(unknownKid).ok).toBe(false);
    // Right key, wrong typ / issuer / audience.
    const otherIss = new AccessTokens(new OAuthRepo(db), secret, () => 'https://evil.example', () => AUD, () => t);
    await otherIss.ensureKey();
    expect(tokens.verify((await otherIss.sign(claims)).token)).toMatchObject({ ok: false, reason: 'claims' });
    const otherAud = new AccessTokens(new OAuthRepo(db), secret, () => ISS, () => 'https://other/v2', () => t);
    await otherAud.ensureKey();
    expect(tokens.verify((await otherAud.sign(claims)).token)).toMatchObject({ ok: false, reason: 'claims' });
    for (const junk of ['', 'a.b', 'a.b.c.d', '!!.!!.!!', `${b64([1])}.${p}.${s}`]) expect(tokens.verify(junk).ok).toBe(false);
  });
});
