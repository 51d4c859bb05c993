/**
 * Publish tokens (docs/behaviour.md "Go live over WHIP"): short-lived bearers that let a page or a
 * guest publish to ONE stream over WHIP (RFC 9725 §4.1 bearer) without ever seeing the stream key.
 * Compact JWS (RFC 7515/7519), HS256 under a key derived from the node secret (a label of its own,
 * so a listener token never passes as a publish token, nor the other way round); nothing stored.
 * Claims: `aud` = `skylark:whip`, `stm` (the stream id), `jti`, `iat`, `exp`. Lifetime: 10 min by
 * default, 60 s to 24 h when asked.
 */
import { createHmac } from 'node:crypto';
import { SignJWT, jwtVerify } from 'jose';
import { randomBase62 } from '../ids.js';

/** Default lifetime of a publish token (s): 10 min. */
export const PUBLISH_TOKEN_TTL_SECONDS = 600;
/** Shortest and longest lifetime that may be asked (s): 60 s and 24 h. */
export const PUBLISH_TOKEN_MIN_TTL_SECONDS = 60;
export const PUBLISH_TOKEN_MAX_TTL_SECONDS = 24 * 3600;
const AUDIENCE = 'skylark:whip';

/** A verified token: the stream it is for, when it expires (ms since the epoch). */
export type PublishTokenCheck = { ok: true; streamId: string; expiresAt: number } | { ok: false; reason: 'invalid' | 'expired' };

/** Whether a bearer looks like a compact JWS (three base64url parts) rather than a stream key. */
export const looksLikeToken = (bearer: string): boolean => /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/.test(bearer);

/** Signs and verifies the publish tokens of one node. */
export class PublishTokens {
  private readonly key: Buffer;

  /** @param nodeSecret the node secret (32 bytes); the HS256 key is HMAC(nodeSecret, label). */
  constructor(nodeSecret: Buffer, private readonly now: () => number = Date.now) {
    this.key = createHmac('sha256', nodeSecret).update('skylark publish tokens v1').digest();
  }

  /**
   * A new token for `streamId`, valid `ttlSeconds` from now.
   * @throws RangeError when `ttlSeconds` is outside 60 s – 24 h or not an integer
   */
  async sign(streamId: string, ttlSeconds = PUBLISH_TOKEN_TTL_SECONDS): Promise<{ token: string; expiresAt: number }> {
    if (!Number.isInteger(ttlSeconds) || ttlSeconds < PUBLISH_TOKEN_MIN_TTL_SECONDS || ttlSeconds > PUBLISH_TOKEN_MAX_TTL_SECONDS) {
      throw new RangeError(`ttlSeconds must be an integer from ${PUBLISH_TOKEN_MIN_TTL_SECONDS} to ${PUBLISH_TOKEN_MAX_TTL_SECONDS}`);
    }
    const iat = Math.floor(this.now() / 1000);
    const exp = iat + ttlSeconds;
    const token = await new SignJWT({ stm: streamId })
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
      .setJti(randomBase62(16))
      .setAudience(AUDIENCE)
      .setIssuedAt(iat)
      .setExpirationTime(exp)
      .sign(this.key);
    return { token, expiresAt: exp * 1000 };
  }

  /** Verifies with jose (RFC 7519 §7.2): HS256 only, audience, expiry. Never throws. */
  async verify(token: string): Promise<PublishTokenCheck> {
    if (token.length > 2048) return { ok: false, reason: 'invalid' };
    try {
      const { payload } = await jwtVerify(token, this.key, { algorithms: ['HS256'], audience: AUDIENCE, currentDate: new Date(this.now()) });
      if (typeof payload.stm !== 'string' || typeof payload.exp !== 'number') return { ok: false, reason: 'invalid' };
      return { ok: true, streamId: payload.stm, expiresAt: payload.exp * 1000 };
    } catch (e) {
      return { ok: false, reason: (e as { code?: string }).code === 'ERR_JWT_EXPIRED' ? 'expired' : 'invalid' };
    }
  }
}
