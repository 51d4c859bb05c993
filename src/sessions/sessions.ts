/**
 * Owner login sessions, shared by the OAuth consent page and (later) the dashboard.
 *
 * - The cookie holds 32 random base62 characters (~190 bits); SQLite keeps only their SHA-256.
 * - Cookie attributes: `HttpOnly; SameSite=Lax; Path=/`, plus `Secure` — and the `__Host-` name
 *   prefix — when `{auth_url}` is https (TLS ends at a proxy in front, PRODUCT.md §1).
 * - Every session, including the pre-login one that the login form needs, carries a CSRF token
 *   (synchronizer token pattern): each form has it in a hidden `csrf_token` field and every POST
 *   must send it back (`checkCsrf`, constant time).
 * - Logging in replaces the session (new id and CSRF token: no session fixation).
 * - Sessions live 12 hours from login (absolute), then the owner logs in again.
 */
import { timingSafeEqual } from 'node:crypto';
import { SessionsRepo, type SessionRow } from '../db/sessions-repo.js';
import type { Database } from '../db/database.js';
import { hashToken } from '../auth/secrets.js';
import { randomBase62 } from '../ids.js';

/** Session lifetime (ms). */
export const SESSION_TTL_MS = 12 * 3600 * 1000;
const PURGE_EVERY_MS = 10 * 60 * 1000;

/** A live session. `accountId` is null before login. */
export interface Session {
  idHash: Buffer;
  accountId: string | null;
  csrfToken: string;
  expiresAt: number;
}

export class Sessions {
  private readonly repo: SessionsRepo;
  private lastPurge = 0;

  /** @param secure whether cookies get `Secure` and the `__Host-` prefix (the public auth URL is https) */
  constructor(db: Database, private readonly secure: () => boolean, private readonly now: () => number = Date.now) {
    this.repo = new SessionsRepo(db);
  }

  /** The cookie name: `__Host-skylark_session` when secure, else `skylark_session`. */
  get cookieName(): string {
    return this.secure() ? '__Host-skylark_session' : 'skylark_session';
  }

  /** The live session named by a `Cookie` header, or null (absent, unknown or expired). */
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

  /**
   * Starts a session (for `accountId`, or anonymous before login), replacing `previous` if given.
   * @returns the session and its `Set-Cookie` header value
   */
  start(accountId: string | null, previous?: Session | null): { session: Session; setCookie: string } {
    const now = this.now();
    this.purge(now);
    if (previous) this.repo.delete(previous.idHash);
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

  /** Ends `session`; returns the `Set-Cookie` value that clears the cookie. */
  end(session: Session): string {
    this.repo.delete(session.idHash);
    return this.cookie('', 0);
  }

  /** Whether `token` (a form's `csrf_token`) is the session's CSRF token. Constant time. */
  checkCsrf(session: Session, token: string | null | undefined): boolean {
    if (!token) return false;
    const a = Buffer.from(token);
    const b = Buffer.from(session.csrfToken);
    return a.length === b.length && timingSafeEqual(a, b);
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
