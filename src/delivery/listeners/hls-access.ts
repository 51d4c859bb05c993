/**
 * HLS access and session tracking (docs/behaviour.md §4, §12): implements `HlsAccess` for src/delivery/hls/routes.ts.
 *
 * - Session ids: the multivariant fetch mints `sid` (16 random base62 + an 8-character HMAC tag
 *   under the node secret, so a client cannot make the server track ids it invented); the variant
 *   URIs carry `?sid=…`, so every media playlist request names its session. Media objects
 *   (segments, parts, init sections) of public streams carry no per-listener query — the same URI
 *   for every listener, so any shared cache can serve them — and cost no tracking: a listener is
 *   present while its player polls its media playlist (blocking reloads included). A player that
 *   re-fetches playlists or switches layers keeps its sid and is counted once.
 * - Token streams (`playback: "token"`): every playlist and segment needs `?token=<listener JWT>`
 *   for this stream (401 without, 403 invalid/expired/other stream); the token is carried into
 *   every URI handed out, and its subject is the session.
 * - A media request without sid or token (a client that skipped the multivariant) is served but
 *   not counted: there is nothing to tell its requests apart by.
 * - Every allowed answer of a token stream is marked `private` (routes answer it
 *   `Cache-Control: private, no-store`, docs/behaviour.md §12).
 *
 * Stream policy (account, playback) is read from SQLite at most once per stream every 2 s, and at once
 * after the stream is updated or deleted.
 */
import { createHmac } from 'node:crypto';
import type { BlockList } from 'node:net';
import type { HlsAccess, HlsDecision } from '../hls/routes.js';
import type { RawRequestInfo } from '../../base/http/server.js';
import type { StreamsRepo } from '../../base/db/streams-repo.js';
import { tokenAdmitted, type ListenerTokens } from '../../base/auth/listener-tokens.js';
import { randomBase62 } from '../../base/ids.js';
import { clientAddress } from '../../base/http/client-address.js';
import { countryOf } from '../../base/geo.js';
import type { ListenerRegistry } from './registry.js';
import { TooManyListenersError } from './session.js';

/** Why a valid token minted with a publishable key is refused by a token stream (docs/behaviour.md §13). */
export const PUBLISHABLE_REFUSED =
  'This stream does not accept listener tokens minted with a publishable key: mint the token with a secret key (on your server), or allow them with playback {mode: "token", publishableKeyTokens: true}.';

/** How long a stream's account and playback mode are cached (ms); a PATCH or DELETE through this process drops the entry at once. */
const POLICY_TTL_MS = 2000;

export interface StreamPolicy {
  accountId: string;
  playback: 'public' | 'token';
  /** A token stream admits listener tokens minted with a publishable key (docs/behaviour.md §13). */
  publishableKeyTokens: boolean;
  /** The ingest codec (`aac`, `mp3`, `opus`). */
  codec: string;
}

/** Where stream policies come from: SQLite on the main thread, the main thread's messages on a worker thread. */
export interface StreamPolicies {
  /** Account, playback and codec of a stream; null when the stream does not exist. */
  policy(streamId: string): StreamPolicy | null;
}

/** Stream policies read from SQLite at most once per stream every POLICY_TTL_MS (2 s), and again at once after a write of the stream (`StreamsRepo.onChange`). */
export class CachedPolicies implements StreamPolicies {
  private readonly policies = new Map<string, { p: StreamPolicy | null; until: number }>();

  constructor(private readonly streams: StreamsRepo, private readonly now: () => number = Date.now) {
    // A PATCH or DELETE applies at once, not after the cache time (docs/behaviour.md §13).
    streams.onChange((id) => this.policies.delete(id));
  }

  policy(streamId: string): StreamPolicy | null {
    const now = this.now();
    const cached = this.policies.get(streamId);
    if (cached && cached.until > now) return cached.p;
    const row = this.streams.getAny(streamId);
    const p: StreamPolicy | null = row ? { accountId: row.account_id, playback: row.playback, publishableKeyTokens: row.playback_publishable_tokens === 1, codec: row.codec } : null;
    if (this.policies.size > 10_000) this.policies.clear();
    this.policies.set(streamId, { p, until: now + POLICY_TTL_MS });
    return p;
  }
}

/** A new HLS session, as the access check reports it: the client address is used for the country and not kept. */
export interface HlsJoin {
  streamId: string;
  accountId: string;
  key: string;
  /** The client address (src/base/http/client-address.ts `clientAddress`). */
  ip: string;
  userAgent: string | null;
  /** Inactivity after which the session leaves (ms). */
  timeoutMs: number;
  /** A listener of the catch-up playlists (docs/behaviour.md §17); absent: live. */
  mode?: 'live' | 'catch_up' | undefined;
  /**
   * Whether the key is a session id minted by the multivariant playlist (not a token's subject):
   * such joins are capped per client address per minute (`ListenerRegistry.admitHls`).
   */
  minted?: boolean | undefined;
}

/**
 * Thrown by `HlsSessions.join` when the client address started as many minted sessions this minute
 * as it may (`SKYLARK_HLS_SESSIONS_PER_IP_PER_MINUTE`): the request is served, the session not
 * counted. `refusedUntil` (epoch ms): the address is refused at least until then (the end of the
 * rate's current minute), so the session need not ask again before.
 */
export class SessionRateError extends Error {
  constructor(
    message: string,
    readonly refusedUntil: number,
  ) {
    super(message);
  }
}

/**
 * Where HLS sessions are counted: the registry itself on the main thread, the batches a worker
 * thread sends to it (src/delivery/listeners/remote.ts) on a worker.
 */
export interface HlsSessions {
  /** Marks the session `key` of `streamId` as seen now; false when it is unknown (the caller then joins it). */
  touch(streamId: string, key: string): boolean;
  /**
   * A new session.
   * @throws TooManyListenersError when the node tracks as many listeners as it may
   * @throws SessionRateError when `j.minted` and the client address is over its session rate
   */
  join(j: HlsJoin): void;
}

/** The registry as `HlsSessions` (the main thread): the country is looked up here, the session rate checked. */
export function registrySessions(registry: ListenerRegistry): HlsSessions {
  return {
    touch: (streamId, key) => registry.touch(streamId, key),
    join: (j) => {
      if (j.minted && !registry.admitHls(j.ip)) throw new SessionRateError('this address started as many listener sessions this minute as it may', registry.hlsRateRefusedUntil());
      registry.join({ streamId: j.streamId, accountId: j.accountId, key: j.key, protocol: 'hls', country: countryOf(j.ip), userAgent: j.userAgent, timeoutMs: j.timeoutMs, mode: j.mode });
    },
  };
}

export interface HlsAccessDeps {
  sessions: HlsSessions;
  policies: StreamPolicies;
  tokens: ListenerTokens;
  trusted: BlockList;
  nodeSecret: Buffer;
  /** The clock `SessionRateError.refusedUntil` is read against (epoch ms; Date.now when absent). */
  now?: (() => number) | undefined;
}

/** Session ids remembered as refused for their address's session rate, at most (a crowd behind one address larger than this asks again each request). */
const MAX_OVER_RATE = 65_536;

/** The value of `name` in a query string (`a=1&b=2`), '' when absent. No decoding: our values are URL-safe. */
export function queryParam(query: string, name: string): string {
  if (query === '') return '';
  let i = query.startsWith(name + '=') ? 0 : query.indexOf('&' + name + '=');
  if (i < 0) return '';
  if (i > 0 || query[0] === '&') i += 1;
  const start = i + name.length + 1;
  const end = query.indexOf('&', start);
  return end < 0 ? query.slice(start) : query.slice(start, end);
}

/** The answer for every media object and media playlist of a public stream (shared: allocation-free on the hot path). */
const PUBLIC: HlsDecision = Object.freeze({ ok: true, query: '', private: false }) as HlsDecision;
const CAPACITY: HlsDecision = Object.freeze({ ok: false, status: 503, code: 'listener_capacity', message: 'This node serves as many listeners as it can; try again later.' }) as HlsDecision;

export class HlsListenerAccess implements HlsAccess {
  private readonly sidKey: Buffer;
  private readonly now: () => number;
  /**
   * Session ids refused for their address's session rate (docs/listeners.md "Sessions per
   * address"), all until `overRateUntil`: the end of the rate's minute in which they were refused.
   * Their address cannot be admitted before then (its count only grows within the minute), so their
   * requests until then are served untracked without asking again (no HMAC, no rate lookup, no
   * refusal). A crowd behind one address thus costs per request what a counted crowd costs.
   */
  private readonly overRate = new Set<string>();
  private overRateUntil = 0;

  constructor(private readonly d: HlsAccessDeps) {
    this.sidKey = createHmac('sha256', d.nodeSecret).update('skylark hls session ids v1').digest();
    this.now = d.now ?? Date.now;
  }

  /** Account and playback of a stream, cached; null when the stream does not exist. */
  policy(streamId: string): StreamPolicy | null {
    return this.d.policies.policy(streamId);
  }

  /** The ingest codec of a stream ('' when unknown). */
  codec(streamId: string): string {
    return this.policy(streamId)?.codec ?? '';
  }

  /** A new session id for `streamId`. */
  mintSid(streamId: string): string {
    const r = randomBase62(16);
    return r + this.tag(streamId, r);
  }

  /** Whether `sid` was minted by this node for `streamId`. */
  validSid(streamId: string, sid: string): boolean {
    return sid.length === 24 && this.tag(streamId, sid.slice(0, 16)) === sid.slice(16);
  }

  enter(streamId: string, query: string): HlsDecision {
    const pol = this.policy(streamId);
    if (!pol) return { ok: false, status: 404, code: 'resource_missing', message: `No live HLS for stream '${streamId}'.` };
    const gated = pol.playback === 'token';
    const token = queryParam(query, 'token');
    if (pol.playback === 'token' || token !== '') {
      const t = this.checkToken(streamId, token, pol);
      if (t) return t.ok ? { ok: true, query: `token=${token}`, private: gated } : t;
    }
    return { ok: true, query: `sid=${this.mintSid(streamId)}`, private: gated };
  }

  object(streamId: string, query: string): HlsDecision {
    const pol = this.policy(streamId);
    if (!pol) return { ok: false, status: 404, code: 'resource_missing', message: `No live HLS for stream '${streamId}'.` };
    if (pol.playback !== 'token') return PUBLIC;
    const token = queryParam(query, 'token');
    const t = this.checkToken(streamId, token, pol)!;
    return t.ok ? { ok: true, query: `token=${token}`, private: true } : t;
  }

  /**
   * A media playlist request. On a public stream the answer is the same playlist for every
   * listener, so the decision carries no query (nothing is built per request): the session named
   * by `sid` is touched (a map lookup), or checked (HMAC) and joined the first time.
   */
  media(streamId: string, query: string, info: RawRequestInfo, timeoutMs: number, mode?: 'catch_up'): HlsDecision {
    const pol = this.policy(streamId);
    if (!pol) return { ok: false, status: 404, code: 'resource_missing', message: `No live HLS for stream '${streamId}'.` };
    const gated = pol.playback === 'token';
    const token = queryParam(query, 'token');
    if (gated || token !== '') {
      const t = this.checkToken(streamId, token, pol);
      if (t && !t.ok) return t;
      if (t) {
        // The token's subject is the session; a token stream's URIs carry the token.
        const d: HlsDecision = gated ? { ok: true, query: `token=${token}`, private: true } : PUBLIC;
        if (this.d.sessions.touch(streamId, t.subject)) return d;
        return this.join(streamId, pol.accountId, t.subject, info, timeoutMs, false, mode) ?? d;
      }
    }
    // A public stream (a token stream answered above): the session is the sid. Without one the
    // request is served but untracked (nothing tells this client's requests apart); an invented
    // one (its tag does not check) is served and not counted.
    const sid = queryParam(query, 'sid');
    if (sid === '' || this.d.sessions.touch(streamId, sid) || this.refusedForRate(sid) || !this.validSid(streamId, sid)) return PUBLIC;
    return this.join(streamId, pol.accountId, sid, info, timeoutMs, true, mode) ?? PUBLIC;
  }

  /** Whether `sid` was refused for its address's session rate within the rate's current minute. */
  private refusedForRate(sid: string): boolean {
    if (this.overRate.size === 0) return false;
    if (this.now() >= this.overRateUntil) {
      this.overRate.clear();
      return false;
    }
    return this.overRate.has(sid);
  }

  /** Remembers `sid` as refused for its address's session rate until `until` (epoch ms). */
  private rememberOverRate(sid: string, until: number): void {
    if (until !== this.overRateUntil) {
      this.overRate.clear();
      this.overRateUntil = until;
    }
    if (this.overRate.size < MAX_OVER_RATE) this.overRate.add(sid);
  }

  /**
   * Joins a new session (`minted`: its key is a sid, capped per address per minute); the refusal
   * to answer when the node is full, else null — also when the address is over its session rate:
   * the playlist is served and the session not counted (docs/listeners.md "Sessions per address").
   */
  private join(streamId: string, accountId: string, key: string, info: RawRequestInfo, timeoutMs: number, minted = false, mode?: 'catch_up'): HlsDecision | null {
    try {
      this.d.sessions.join({
        streamId,
        accountId,
        key,
        ip: clientAddress(info.remoteAddress(), info.header('x-forwarded-for'), this.d.trusted),
        userAgent: info.header('user-agent') || null,
        timeoutMs,
        minted,
        mode,
      });
    } catch (e) {
      if (e instanceof TooManyListenersError) return CAPACITY;
      if (e instanceof SessionRateError) {
        if (minted && e.refusedUntil > 0) this.rememberOverRate(key, e.refusedUntil);
        return null;
      }
      throw e;
    }
    return null;
  }

  /**
   * Checks `token` for `streamId` under its policy. A token stream needs one (401 without, 403
   * invalid, or minted with a publishable key where the stream does not allow that). On a public
   * stream a bad token is ignored (null) and the session falls back to a sid.
   */
  private checkToken(streamId: string, token: string, pol: StreamPolicy): ({ ok: true; subject: string }) | (HlsDecision & { ok: false }) | null {
    const required = pol.playback === 'token';
    if (token === '') return required ? { ok: false, status: 401, code: 'missing_token', message: 'This stream needs a listener token: add ?token=<token> to the playlist URL.' } : null;
    const r = this.d.tokens.verifySync(token); // cached per token by ListenerTokens
    if (r.ok && r.claims.streamId === streamId && (!required || tokenAdmitted(r.claims, pol.publishableKeyTokens))) return { ok: true, subject: r.claims.subject };
    if (!required) return null;
    if (r.ok && r.claims.streamId === streamId) return { ok: false, status: 403, code: 'invalid_token', message: PUBLISHABLE_REFUSED };
    if (!r.ok && r.reason === 'expired') return { ok: false, status: 403, code: 'token_expired', message: 'The listener token has expired; get a new one.' };
    if (r.ok) return { ok: false, status: 403, code: 'invalid_token', message: 'The listener token is for another stream.' };
    return { ok: false, status: 403, code: 'invalid_token', message: 'The listener token is malformed or its signature is invalid.' };
  }

  private tag(streamId: string, r: string): string {
    return createHmac('sha256', this.sidKey).update(streamId).update(r).digest('base64url').slice(0, 8);
  }
}
