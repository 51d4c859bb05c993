/**
 * The one place that decides who a `/v2` request acts for and whether it may (spec
 * "Authentication", docs/behaviour.md §7, §9). Every resource's routes take their guards from here, so that
 * API keys and OAuth access tokens, scopes, rate limits and their headers apply to every endpoint
 * alike. Order per request: authenticate (401 — not counted), count against the account's rate
 * limit (429 — not counted), then the scope (403). The rate-limit headers go into
 * `req.responseHeaders`, which the HTTP layer adds to whatever the request is answered with.
 */
import type { ApiRequest } from '../http/server.js';
import type { AccountsRepo } from '../db/accounts-repo.js';
import type { PublicUrls } from '../config.js';
import type { OAuthRepo } from '../db/oauth-repo.js';
import { ApiError } from '../errors/errors.js';
import { authenticate, credentialOf, requireScope, unauthorized, type Principal, type Scope } from './api-keys.js';
import { AccessTokens } from './jwt.js';
import { SlidingWindowLimiter, type RateDecision } from './ratelimit/sliding-window.js';
import { writeRateLimitHeaders } from './ratelimit/headers.js';
import { addressGroup } from '../limits/address-key.js';
import { clientAddress, trustedProxies } from '../http/client-address.js';
import type { BlockList } from 'node:net';
import { LoginThrottle } from './login-throttle.js';

/** Requests per window by plan, and per client IP on the OAuth endpoints. Mutable at run time (tests raise them). */
export interface RateLimits {
  free: number;
  paid: number;
  /** Per client IP on `{auth_url}/oauth/*`. */
  oauthPerIp: number;
  windowS: number;
}

/** docs/behaviour.md §7: free 60, paid 500 per 60 s. The OAuth per-IP limit is ours (docs/api-platform.md). */
export const DEFAULT_RATE_LIMITS: RateLimits = { free: 60, paid: 500, oauthPerIp: 120, windowS: 60 };

/** What the Guard needs beyond the accounts; without it, JWTs are refused and the clock is Date.now. */
export interface GuardOptions {
  /** OAuth grants and tokens (revocation, signing keys). */
  oauth: OAuthRepo;
  nodeSecret: Buffer;
  urls: () => PublicUrls;
  now?: () => number;
  /** `SKYLARK_TRUSTED_PROXIES` (src/base/http/client-address.ts). @throws Error from the constructor naming a bad entry */
  trustedProxies?: string[];
  limits?: Partial<RateLimits>;
}

/** Route options carrying the guard and, for the route list / scope map / OpenAPI, the scope. */
export interface ScopedRoute {
  guard: (req: ApiRequest) => Principal;
  scope: Scope;
}

const PLAN_TTL_MS = 5000;
const AUTH_CACHE_MAX = 10_000;

/** Route guards by scope. */
export class Guard {
  /** Access tokens (signing needs `tokens.ensureKey()`; verification works at once). Null without options. */
  readonly tokens: AccessTokens | null;
  readonly oauth: OAuthRepo | null;
  readonly limits: RateLimits;
  /** Backoff of failed owner logins per account, whatever the client IP (dashboard and OAuth login forms). */
  readonly logins: LoginThrottle;
  private readonly accountLimiter: SlidingWindowLimiter;
  private readonly ipLimiter: SlidingWindowLimiter;
  private readonly now: () => number;
  private readonly trusted: BlockList;
  private readonly plans = new Map<string, { plan: 'free' | 'paid'; until: number }>();
  /**
   * Authorization header → principal (and, for JWTs, expiry in ms), valid while the database's
   * change stamp is unchanged: any write here or commit elsewhere (a key rolled by the CLI, a token
   * revoked) empties it, so revocation stays immediate.
   */
  private readonly authCache = new Map<string, { p: Principal; expMs: number }>();
  private authStamp = -1;
  /** Whether `authStamp` was read in this turn of the event loop (see `authenticate`). */
  private stampFresh = false;
  private readonly expireStamp = () => {
    this.stampFresh = false;
  };

  constructor(private readonly accounts: AccountsRepo, opts?: GuardOptions) {
    this.now = opts?.now ?? Date.now;
    this.limits = { ...DEFAULT_RATE_LIMITS, ...opts?.limits };
    this.accountLimiter = new SlidingWindowLimiter(this.limits.windowS * 1000, this.now);
    this.ipLimiter = new SlidingWindowLimiter(this.limits.windowS * 1000, this.now);
    this.trusted = trustedProxies(opts?.trustedProxies ?? []);
    this.logins = new LoginThrottle(this.now);
    if (opts) {
      this.oauth = opts.oauth;
      this.tokens = new AccessTokens(this.oauth, opts.nodeSecret, () => opts.urls().authUrl, () => opts.urls().baseUrl, this.now);
    } else {
      this.oauth = null;
      this.tokens = null;
    }
  }

  /**
   * Authenticates the request, counts it against the account's rate limit and requires `scope`.
   * Sets `req.actor` (the credential: account and key or OAuth grant, `credentialOf`) for idempotency keys.
   * @throws ApiError 401 (missing_token, invalid_token, token_expired, key_revoked), 429 rate_limit_exceeded, 403 insufficient_scope
   */
  check(req: ApiRequest, scope: Scope): Principal {
    const p = this.authenticate(req.headers.authorization);
    this.countRequest(req, p.accountId);
    requireScope(p, scope);
    req.actor = credentialOf(p);
    return p;
  }

  /** Route options `{ guard, scope }` requiring `scope` (checked before the body is read). */
  scope(scope: Scope): ScopedRoute {
    return { guard: (req) => this.check(req, scope), scope };
  }

  /**
   * Who an `Authorization` header value acts for: an API key (`svc_sk_`/`svc_pk_`) or an OAuth
   * access token (JWT, checked for signature, issuer, audience, expiry and revocation of the token
   * or its grant). No rate limit, no scope.
   * @throws ApiError 401
   */
  authenticate(header: string): Principal {
    if (!this.oauth) return this.authenticateUncached(header).p;
    // The change stamp is read once per turn of the event loop: uWS answers a whole batch of ready
    // requests in one turn, and a change (CLI roll, revocation) that a client waited for before
    // sending its request always lands in an earlier turn, so nothing stale is ever observable.
    if (!this.stampFresh) {
      const stamp = this.oauth.changeStamp();
      if (stamp !== this.authStamp) {
        this.authCache.clear();
        this.authStamp = stamp;
      }
      this.stampFresh = true;
      setImmediate(this.expireStamp);
    }
    const hit = this.authCache.get(header);
    if (hit && this.now() < hit.expMs) return hit.p;
    const r = this.authenticateUncached(header);
    if (this.authCache.size >= AUTH_CACHE_MAX) this.authCache.clear();
    this.authCache.set(header, r);
    return r.p;
  }

  /** Authenticates without the cache; `expMs` is when the result stops being valid (JWT expiry). */
  private authenticateUncached(header: string): { p: Principal; expMs: number } {
    const m = /^Bearer[ ]+(\S+)\s*$/i.exec(header);
    const token = m?.[1];
    if (!token || token.startsWith('svc_') || !AccessTokens.looksLikeJwt(token) || !this.tokens || !this.oauth) {
      return { p: authenticate(header, this.accounts), expMs: Infinity };
    }
    const r = this.tokens.verify(token);
    if (!r.ok) {
      if (r.reason === 'expired') throw unauthorized('token_expired', 'The access token expired; get a new one with your refresh token.');
      throw unauthorized('invalid_token', 'The token is malformed or its signature is invalid.');
    }
    const c = r.claims;
    const live = this.oauth.liveness(c.gid, c.jti);
    if (live.grantRevoked || live.jtiRevoked) throw unauthorized('invalid_token', 'The access token was revoked.');
    if (!this.planOf(c.sub)) throw unauthorized('invalid_token', 'The account of this access token no longer exists.');
    return {
      p: { accountId: c.sub, kind: 'oauth_token', keyId: c.jti, scopes: new Set(c.scope.split(' ') as Scope[]), clientId: c.client_id, grantId: c.gid },
      expMs: c.exp * 1000,
    };
  }

  /** The account's rate-limit state without counting (GET /v2/account "usage this minute"). */
  usage(accountId: string): RateDecision & { plan: 'free' | 'paid'; windowS: number } {
    const plan = this.planOf(accountId) ?? 'free';
    return { ...this.accountLimiter.peek(accountId, this.limits[plan]), plan, windowS: this.limits.windowS };
  }

  /**
   * Counts one OAuth-endpoint request of the client at `peer` (its `X-Forwarded-For` trusted only
   * from configured proxies) and writes the rate-limit headers into `headers`.
   * @returns whether it is allowed; when not, `headers` carries Retry-After
   */
  limitClient(peer: string, forwardedFor: string, headers: Record<string, string>): boolean {
    const ip = this.clientAddress(peer, forwardedFor);
    // Keyed by address group (IPv6: its /64), like every per-address cap (docs/listeners.md).
    const d = this.ipLimiter.take(`ip:${addressGroup(ip)}`, this.limits.oauthPerIp);
    writeRateLimitHeaders(headers, 'oauth', this.limits.windowS, d, this.now());
    return d.allowed;
  }

  /** The client address of a request from `peer` (its `X-Forwarded-For` trusted only from configured proxies). */
  clientAddress(peer: string, forwardedFor: string): string {
    return clientAddress(peer, forwardedFor, this.trusted);
  }

  private countRequest(req: ApiRequest, accountId: string): void {
    const plan = this.planOf(accountId);
    if (!plan) throw unauthorized('invalid_token', 'The account of this key no longer exists.');
    const d = this.accountLimiter.take(accountId, this.limits[plan]);
    writeRateLimitHeaders(req.responseHeaders, plan, this.limits.windowS, d, this.now());
    if (!d.allowed) {
      const s = req.responseHeaders['Retry-After'];
      throw new ApiError('rate_limit_exceeded', `Too many requests: the ${plan} plan allows ${this.limits[plan]} per ${this.limits.windowS} s. Retry after ${s} s.`);
    }
  }

  /** The account's plan (cached for a few seconds), or undefined when there is no such account. */
  private planOf(accountId: string): 'free' | 'paid' | undefined {
    const now = this.now();
    const hit = this.plans.get(accountId);
    if (hit && hit.until > now) return hit.plan;
    const row = this.accounts.get(accountId);
    if (!row) {
      this.plans.delete(accountId);
      return undefined;
    }
    if (this.plans.size > 10_000) this.plans.clear();
    this.plans.set(accountId, { plan: row.plan, until: now + PLAN_TTL_MS });
    return row.plan;
  }
}
