/**
 * Backoff of failed owner logins per account (the dashboard and OAuth login forms), on top of the
 * per-client-IP limit of those forms (Guard.limitClient): guessing one owner's password from many
 * addresses is slowed down for that account, whatever the client IP (OWASP Authentication Cheat
 * Sheet, "Account lockout"; docs/api-platform.md "Owner login").
 *
 * - Accounts are named by the login email as typed (trimmed, lower-cased, SHA-256), whether or not
 *   it exists, so the answers do not tell which emails have an account.
 * - The first `freeFailures` (5) failures cost nothing; each later one locks the account for
 *   `baseDelayMs · 2^(k−1)` (1 s, 2 s, 4 s, …) up to `maxDelayMs` (15 min). Attempts during a lock
 *   are refused without checking the password and are not counted: a stranger can keep an
 *   account locked at most 15 minutes at a time, and only by keeping on failing.
 * - A success resets the account's failures. Failures are forgotten `forgetAfterMs` (24 h) after the
 *   last one.
 * - Known addresses: the client addresses the owner signed in from (the newest 8, for 30 days) do
 *   not see the account-wide lock; each has its own failure count with the same schedule. So a
 *   stranger locking the account out from elsewhere does not lock the owner out at home.
 * - Memory: at most `maxTracked` failure records (least recently tried dropped first: an account
 *   under attack is tried all the time, so spraying other emails does not evict it) and 8
 *   addresses per account that ever signed in; nothing when nobody fails.
 */
import { createHash } from 'node:crypto';

/** Tunables of the backoff (ms and counts). */
export interface LoginThrottleOptions {
  /** Failures before the first lock. */
  freeFailures: number;
  /** The first lock (ms); each further failure doubles it. */
  baseDelayMs: number;
  /** The longest lock (ms). */
  maxDelayMs: number;
  /** Failures are forgotten this long after the last one (ms). */
  forgetAfterMs: number;
  /** Failure records kept at most (accounts and known-address pairs). */
  maxTracked: number;
  /** How long a sign-in makes its client address known for the account (ms). */
  knownAddressTtlMs: number;
  /** Known addresses kept per account (newest first). */
  knownAddressesPerAccount: number;
}

export const LOGIN_THROTTLE_DEFAULTS: LoginThrottleOptions = {
  freeFailures: 5,
  baseDelayMs: 1000,
  maxDelayMs: 15 * 60_000,
  forgetAfterMs: 24 * 3600_000,
  maxTracked: 20_000,
  knownAddressTtlMs: 30 * 24 * 3600_000,
  knownAddressesPerAccount: 8,
};

/** What `check` decided; `retryAfterMs` is the rest of the lock (ms). */
export type LoginCheck = { allowed: true } | { allowed: false; retryAfterMs: number };

interface Failures {
  count: number;
  /** Until when attempts are refused (ms; 0 = not locked). */
  lockedUntil: number;
  /** The last failure (ms). */
  lastAt: number;
}

/** How often records idle past `forgetAfterMs` are swept (ms). */
const SWEEP_EVERY_MS = 60_000;

export class LoginThrottle {
  readonly options: LoginThrottleOptions;
  /** Failure records by scope key, least recently tried first. */
  private readonly failures = new Map<string, Failures>();
  /** Known client addresses per account key: address → known until (ms). */
  private readonly known = new Map<string, Map<string, number>>();
  private lastSweep = 0;

  constructor(
    private readonly now: () => number = Date.now,
    options: Partial<LoginThrottleOptions> = {},
  ) {
    this.options = { ...LOGIN_THROTTLE_DEFAULTS, ...options };
  }

  /**
   * Starts a login attempt for `email` from client address `ip`: refused while the account (or,
   * from a known address, that address) is locked; otherwise counted as a failure at once, until
   * `succeeded` says otherwise — so attempts sent in parallel cannot all slip in before the first
   * wrong password is known.
   */
  begin(email: string, ip: string): LoginCheck {
    const now = this.now();
    this.sweep(now);
    const key = this.scope(email, ip);
    let f = this.failures.get(key);
    if (f) this.failures.delete(key); // re-inserted last: least recently tried first
    if (f && f.lockedUntil > now) {
      this.failures.set(key, f); // an account under attack stays tracked
      return { allowed: false, retryAfterMs: f.lockedUntil - now };
    }
    if (!f || now - f.lastAt > this.options.forgetAfterMs) f = { count: 0, lockedUntil: 0, lastAt: now };
    f.count++;
    f.lastAt = now;
    const over = f.count - this.options.freeFailures;
    if (over > 0) f.lockedUntil = now + Math.min(this.options.maxDelayMs, this.options.baseDelayMs * 2 ** Math.min(over - 1, 40));
    while (this.failures.size >= this.options.maxTracked) this.failures.delete(this.failures.keys().next().value!);
    this.failures.set(key, f);
    return { allowed: true };
  }

  /** A login begun with `begin` succeeded: the account's failures are reset and `ip` becomes known for it. */
  succeeded(email: string, ip: string): void {
    const account = accountKey(email);
    this.failures.delete(`a:${account}`);
    this.failures.delete(`k:${account}:${ip}`);
    const now = this.now();
    let addresses = this.known.get(account);
    if (!addresses) this.known.set(account, (addresses = new Map()));
    addresses.delete(ip);
    addresses.set(ip, now + this.options.knownAddressTtlMs);
    for (const [a, until] of addresses) if (until <= now || addresses.size > this.options.knownAddressesPerAccount) addresses.delete(a);
  }

  /** Failure records held (for tests and metrics). */
  get tracked(): number {
    return this.failures.size;
  }

  /** The failure record a login of `email` from `ip` counts against: the account's, or its known address's. */
  private scope(email: string, ip: string): string {
    const account = accountKey(email);
    const until = this.known.get(account)?.get(ip);
    return until !== undefined && until > this.now() ? `k:${account}:${ip}` : `a:${account}`;
  }

  /** Drops records whose last failure is older than `forgetAfterMs` and that are not locked; at most once a minute. */
  private sweep(now: number): void {
    if (now - this.lastSweep < SWEEP_EVERY_MS) return;
    this.lastSweep = now;
    for (const [k, f] of this.failures) if (now - f.lastAt > this.options.forgetAfterMs && f.lockedUntil <= now) this.failures.delete(k);
    for (const [k, addresses] of this.known) {
      for (const [a, until] of addresses) if (until <= now) addresses.delete(a);
      if (addresses.size === 0) this.known.delete(k);
    }
  }
}

/** The account key of a login email: SHA-256 of the trimmed, lower-cased email (base64url). */
function accountKey(email: string): string {
  return createHash('sha256').update(email.trim().toLowerCase(), 'utf8').digest('base64url');
}
