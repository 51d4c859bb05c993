/**
 * Listener tokens (docs/behaviour.md §4, spec "Limits": 24 h): compact JWS (RFC 7515/7519) signed with
 * HS256 under a key derived from the node secret, so every process on the node verifies them and
 * nothing is stored. Claims: `sub` (a random listener subject `lsub_…`: one HLS session per token),
 * `aud` = `skylark:listen`, `stm` (the stream id), `mnt` (who minted it: the credential kind,
 * `ListenerTokenMinter`), `iat`, `exp`. A token minted with a publishable credential opens a
 * `playback: "token"` stream only when the stream allows it (`tokenAdmitted`, docs/behaviour.md §13).
 *
 * Signing uses jose. Verification has two entry points: `verifyListenerToken` (jose, async) for
 * async routes such as WHEP, and `verifyListenerTokenSync` for the HLS hot path, where uWS raw
 * handlers answer synchronously: the same checks done with node:crypto (HMAC-SHA256, constant-time
 * compare, `alg` must be HS256, `aud`, `exp`), with a small cache of verified tokens.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { SignJWT, jwtVerify } from 'jose';
import { randomBase62 } from '../ids.js';
import { allows, type Principal } from './api-keys.js';

/** Token lifetime (s): 24 h (spec "Limits", changed from 6 h in 2.3.0). */
export const LISTENER_TOKEN_TTL_SECONDS = 24 * 3600;
const AUDIENCE = 'skylark:listen';
/** Verified tokens kept for the hot path; the map is cleared when it grows past this. */
const CACHE_MAX = 50_000;

/**
 * Who minted a listener token (its `mnt` claim): a secret key, a publishable key, an OAuth token
 * with `streams:write` (`oauth_write`) or with only read scopes (`oauth_read`), or the dashboard.
 */
export type ListenerTokenMinter = 'secret_key' | 'publishable_key' | 'oauth_write' | 'oauth_read' | 'dashboard';
const MINTERS: ReadonlySet<string> = new Set<ListenerTokenMinter>(['secret_key', 'publishable_key', 'oauth_write', 'oauth_read', 'dashboard']);

/** The minter of a token requested by the API principal `p`. */
export function minterOf(p: Principal): ListenerTokenMinter {
  if (p.kind === 'oauth_token') return allows(p, 'streams:write') ? 'oauth_write' : 'oauth_read';
  return p.kind;
}

/** What a valid token says. `expiresAt` in ms since the epoch. */
export interface ListenerClaims {
  subject: string;
  streamId: string;
  expiresAt: number;
  /** Who minted it; null for a token minted before tokens said so (treated as a secret key's). */
  mintedBy: ListenerTokenMinter | null;
}

/**
 * Whether a valid token for the stream opens it while it is `playback: "token"`: tokens minted
 * with a publishable key (or an OAuth token without `streams:write`) only when the stream allows
 * them (`publishableKeyTokens`); tokens of a secret key, an OAuth token with `streams:write` or
 * the dashboard always (docs/behaviour.md §13).
 */
export function tokenAdmitted(claims: ListenerClaims, publishableKeyTokens: boolean): boolean {
  return publishableKeyTokens || (claims.mintedBy !== 'publishable_key' && claims.mintedBy !== 'oauth_read');
}

const minterClaim = (v: unknown): ListenerTokenMinter | null | undefined => (v === undefined ? null : typeof v === 'string' && MINTERS.has(v) ? (v as ListenerTokenMinter) : undefined);

/** Why a token was refused: `invalid` (malformed, bad signature, wrong audience) or `expired`. */
export type TokenCheck = { ok: true; claims: ListenerClaims } | { ok: false; reason: 'invalid' | 'expired' };

/** Signs and verifies listener tokens of one node. */
export class ListenerTokens {
  private readonly key: Buffer;
  private readonly cache = new Map<string, ListenerClaims>();

  /** @param nodeSecret the node secret (32 bytes); the HS256 key is HMAC(nodeSecret, label). */
  constructor(nodeSecret: Buffer, private readonly now: () => number = Date.now) {
    this.key = createHmac('sha256', nodeSecret).update('skylark listener tokens v1').digest();
  }

  /** A new token for `streamId`, valid 24 h from now, minted by `mintedBy`. */
  async sign(streamId: string, mintedBy: ListenerTokenMinter): Promise<{ token: string; claims: ListenerClaims }> {
    const iat = Math.floor(this.now() / 1000);
    const exp = iat + LISTENER_TOKEN_TTL_SECONDS;
    const subject = `lsub_${randomBase62(20)}`;
    const token = await new SignJWT({ stm: streamId, mnt: mintedBy })
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
      .setSubject(subject)
      .setAudience(AUDIENCE)
      .setIssuedAt(iat)
      .setExpirationTime(exp)
      .sign(this.key);
    return { token, claims: { subject, streamId, expiresAt: exp * 1000, mintedBy } };
  }

  /** Verifies with jose (RFC 7519 §7.2): HS256 only, audience, expiry. */
  async verify(token: string): Promise<TokenCheck> {
    try {
      const { payload } = await jwtVerify(token, this.key, { algorithms: ['HS256'], audience: AUDIENCE, currentDate: new Date(this.now()) });
      const mintedBy = minterClaim(payload.mnt);
      if (typeof payload.sub !== 'string' || typeof payload.stm !== 'string' || typeof payload.exp !== 'number' || mintedBy === undefined) return { ok: false, reason: 'invalid' };
      return { ok: true, claims: { subject: payload.sub, streamId: payload.stm, expiresAt: payload.exp * 1000, mintedBy } };
    } catch (e) {
      return { ok: false, reason: (e as { code?: string }).code === 'ERR_JWT_EXPIRED' ? 'expired' : 'invalid' };
    }
  }

  /**
   * The same checks as `verify`, synchronously (for uWS raw handlers). A verified token is cached
   * (by its full text) until it expires, so a player's segment GETs cost one map lookup.
   */
  verifySync(token: string): TokenCheck {
    const cached = this.cache.get(token);
    if (cached) return cached.expiresAt > this.now() ? { ok: true, claims: cached } : { ok: false, reason: 'expired' };
    if (token.length > 2048) return { ok: false, reason: 'invalid' };
    const parts = token.split('.');
    if (parts.length !== 3) return { ok: false, reason: 'invalid' };
    const [h, p, s] = parts as [string, string, string];
    const expected = createHmac('sha256', this.key).update(`${h}.${p}`).digest();
    const got = Buffer.from(s, 'base64url');
    if (got.length !== expected.length || !timingSafeEqual(got, expected)) return { ok: false, reason: 'invalid' };
    let header: { alg?: unknown };
    let payload: { sub?: unknown; stm?: unknown; exp?: unknown; aud?: unknown; mnt?: unknown };
    try {
      header = JSON.parse(Buffer.from(h, 'base64url').toString('utf8'));
      payload = JSON.parse(Buffer.from(p, 'base64url').toString('utf8'));
    } catch {
      return { ok: false, reason: 'invalid' };
    }
    if (header.alg !== 'HS256' || payload.aud !== AUDIENCE) return { ok: false, reason: 'invalid' };
    const mintedBy = minterClaim(payload.mnt);
    if (typeof payload.sub !== 'string' || typeof payload.stm !== 'string' || typeof payload.exp !== 'number' || mintedBy === undefined) return { ok: false, reason: 'invalid' };
    const claims: ListenerClaims = { subject: payload.sub, streamId: payload.stm, expiresAt: payload.exp * 1000, mintedBy };
    if (claims.expiresAt <= this.now()) return { ok: false, reason: 'expired' };
    if (this.cache.size >= CACHE_MAX) this.cache.clear();
    this.cache.set(token, claims);
    return { ok: true, claims };
  }
}
