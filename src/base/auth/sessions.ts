/**
 * Owner login sessions, shared by the OAuth consent page and the dashboard.
 *
 * - Signed in: the cookie holds 32 random base62 characters (~190 bits); SQLite keeps only their
 *   SHA-256. Sessions live 12 hours from login (absolute), then the owner logs in again.
 * - Before login nothing is stored: the same cookie holds a signed pre-login token
 *   `<nonce>.<expiry>.<mac>` — a 22-character base62 nonce (~131 bits), the expiry in Unix
 *   seconds (base 36), and HMAC-SHA256 over both under a key derived from the node secret
 *   (base64url). It lives one hour. Its CSRF token is derived from the nonce with another key
 *   derived from the node secret, so a form's `csrf_token` can be checked without any row: an
 *   anonymous page view costs no database write (docs/decisions.md "Pre-login sessions").
 * - Cookie attributes: `HttpOnly; SameSite=Lax; Path=/`, plus `Secure` — and the `__Host-` name
 *   prefix — when `{auth_url}` is https (TLS ends at a proxy in front, docs/behaviour.md §1).
 * - Every form, the login form included, carries the session's CSRF token in a hidden
 *   `csrf_token` field, and every POST must send it back (`checkCsrf`, constant time).
 * - Logging in replaces the pre-login token (or an earlier session) with a new session id and CSRF
 *   token: no session fixation.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { SessionsRepo, type SessionRow } from '../db/sessions-repo.js';
import type { Database } from '../db/database.js';
import { hashToken } from './secrets.js';
import { randomBase62 } from '../ids.js';

/** Session lifetime (ms). */
export const SESSION_TTL_MS = 12 * 3600 * 1000;
/** Pre-login token lifetime (ms): how long a login form stays usable. */
export const PRE_LOGIN_TTL_MS = 3600 * 1000;
/** A pre-login token with less than this left (ms) is replaced when a form is shown. */
const PRE_LOGIN_RENEW_MS = PRE_LOGIN_TTL_MS / 2;
const PURGE_EVERY_MS = 10 * 60 * 1000;
const PRE_LOGIN_RE = /^([A-Za-z0-9]{22})\.([0-9a-z]{1,11})\.([A-Za-z0-9_-]{43})$/;
const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** A live session, or a pre-login one (`accountId` null, nothing stored). */
export interface Session {
  /** SHA-256 of the session id (stored sessions), or of the pre-login nonce. */
  idHash: Buffer;
  accountId: string | null;
  csrfToken: string;
  /** When it ends (ms). */
  expiresAt: number;
}

export class Sessions {
  private readonly repo: SessionsRepo;
  private readonly macKey: Buffer;
  private readonly csrfKey: Buffer;
  private lastPurge = 0;

  /**
   * @param secret the node secret (32 bytes): pre-login tokens are signed with keys derived from it
   * @param secure whether cookies get `Secure` and the `__Host-` prefix (the public auth URL is https)
   */
  constructor(db: Database, secret: Buffer, private readonly secure: () => boolean, private readonly now: () => number = Date.now) {
    this.repo = new SessionsRepo(db);
    this.macKey = createHmac('sha256', secret).update('skylark pre-login token v1').digest();
    this.csrfKey = createHmac('sha256', secret).update('skylark pre-login csrf v1').digest();
  }

  /** The cookie name: `__Host-skylark_session` when secure, else `skylark_session`. */
  get cookieName(): string {
    return this.secure() ? '__Host-skylark_session' : 'skylark_session';
  }

  /** The live signed-in session named by a `Cookie` header, or null (absent, pre-login, unknown or expired). */
  fromCookie(cookieHeader: string): Session | null {
    const value = readCookie(cookieHeader, this.cookieName);
    if (!value || !/^[A-Za-z0-9]{32}$/.test(value)) return null;
    const idHash = hashToken(value);
    const row = this.repo.get(idHash);
    if (!row) return null;
    if (row.expires_at <= this.now()) {
      this.repo.delete(idHash);
      return null;
    }
    return toSession(row);
  }

  /** The signed-in session of a `Cookie` header, else its valid pre-login token, else null. */
  current(cookieHeader: string): Session | null {
    return this.fromCookie(cookieHeader) ?? this.preLoginFromCookie(cookieHeader);
  }

  /**
   * The pre-login token for a login form: the one in `cookieHeader` while it has more than half its
   * hour left, else a new one with its `Set-Cookie` value. Writes nothing.
   */
  preLogin(cookieHeader: string): { session: Session; setCookie?: string } {
    const held = this.preLoginFromCookie(cookieHeader);
    if (held && held.expiresAt - this.now() > PRE_LOGIN_RENEW_MS) return { session: held };
    const nonce = randomBase62(22);
    const exp = Math.floor((this.now() + PRE_LOGIN_TTL_MS) / 1000);
    const value = `${nonce}.${exp.toString(36)}.${this.mac(nonce, exp)}`;
    return { session: this.preLoginSession(nonce, exp), setCookie: this.cookie(value, Math.floor(PRE_LOGIN_TTL_MS / 1000)) };
  }

  /**
   * Starts a signed-in session for `accountId`, replacing `previous` (deleted when it was stored).
   * @returns the session and its `Set-Cookie` header value
   */
  start(accountId: string, previous?: Session | null): { session: Session; setCookie: string } {
    const now = this.now();
    this.purge(now);
    if (previous?.accountId) this.repo.delete(previous.idHash);
    const value = randomBase62(32);
    const row: SessionRow = {
      id_hash: hashToken(value),
      account_id: accountId,
      csrf_token: randomBase62(32),
      created_at: now,
      expires_at: now + SESSION_TTL_MS,
      last_seen_at: now,
    };
    this.repo.insert(row);
    return { session: toSession(row), setCookie: this.cookie(value, Math.floor(SESSION_TTL_MS / 1000)) };
  }

  /** Ends `session` (a stored one is deleted); returns the `Set-Cookie` value that clears the cookie. */
  end(session: Session): string {
    if (session.accountId) this.repo.delete(session.idHash);
    return this.cookie('', 0);
  }

  /** Ends `session` and hands out a new pre-login token in its place ("use another account"). */
  restart(session: Session): { session: Session; setCookie: string } {
    if (session.accountId) this.repo.delete(session.idHash);
    const fresh = this.preLogin('');
    return { session: fresh.session, setCookie: fresh.setCookie! };
  }

  /** Whether `token` (a form's `csrf_token`) is the session's CSRF token. Constant time. */
  checkCsrf(session: Session, token: string | null | undefined): boolean {
    if (!token) return false;
    const a = Buffer.from(token);
    const b = Buffer.from(session.csrfToken);
    return a.length === b.length && timingSafeEqual(a, b);
  }

  /** The pre-login token of a `Cookie` header when its MAC is right and it has not expired, else null. */
  private preLoginFromCookie(cookieHeader: string): Session | null {
    const m = PRE_LOGIN_RE.exec(readCookie(cookieHeader, this.cookieName) ?? '');
    if (!m) return null;
    const [, nonce, exp36, mac] = m as unknown as [string, string, string, string];
    const exp = parseInt(exp36, 36);
    const want = Buffer.from(this.mac(nonce, exp));
    const got = Buffer.from(mac);
    if (want.length !== got.length || !timingSafeEqual(want, got)) return null;
    if (exp * 1000 <= this.now()) return null;
    return this.preLoginSession(nonce, exp);
  }

  private preLoginSession(nonce: string, exp: number): Session {
    const d = createHmac('sha256', this.csrfKey).update(nonce).digest();
    let csrf = '';
    for (let i = 0; i < 32; i++) csrf += ALPHABET[d[i]! % 62]; // 32 characters, ~190 bits
    return { idHash: hashToken(`pre-login:${nonce}`), accountId: null, csrfToken: csrf, expiresAt: exp * 1000 };
  }

  private mac(nonce: string, exp: number): string {
    return createHmac('sha256', this.macKey).update(`${nonce}.${exp}`).digest('base64url');
  }

  private cookie(value: string, maxAgeS: number): string {
    return `${this.cookieName}=${value}; Path=/; Max-Age=${maxAgeS}; HttpOnly; SameSite=Lax${this.secure() ? '; Secure' : ''}`;
  }

  private purge(now: number): void {
    if (now - this.lastPurge < PURGE_EVERY_MS) return;
    this.lastPurge = now;
    this.repo.purge(now);
  }
}

function toSession(r: SessionRow): Session {
  return { idHash: r.id_hash, accountId: r.account_id, csrfToken: r.csrf_token, expiresAt: r.expires_at };
}

/** The value of cookie `name` in a `Cookie` header (RFC 6265 §5.4), or null. */
export function readCookie(header: string, name: string): string | null {
  if (!header) return null;
  for (const part of header.split(';')) {
    const i = part.indexOf('=');
    if (i < 0) continue;
    if (part.slice(0, i).trim() === name) return part.slice(i + 1).trim();
  }
  return null;
}
