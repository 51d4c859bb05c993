/**
 * Who may use the dashboard and how a request proves it: the owner-login session (the same cookie
 * and session store as the OAuth consent page, src/base/auth/sessions.ts; before login a signed
 * pre-login token, nothing stored), the CSRF token on every mutation (a form's `csrf_token` field,
 * or the `X-CSRF-Token` header of the upload), a same-origin check on `Origin`, and the flash messages of POST-redirect-GET (one-time secrets live here, in
 * memory, keyed by the session: never in a URL).
 */
import type { AccountRow, AccountsRepo } from '../../base/db/accounts-repo.js';
import type { WebReply, WebRequest } from '../../base/http/server.js';
import type { PublicUrls } from '../../base/config.js';
import type { Session, Sessions } from '../../base/auth/sessions.js';
import type { Flash } from './html.js';

/** A signed-in request: the session and its account. */
export interface Signed {
  session: Session;
  account: AccountRow;
}

/** How long an unread flash message is kept (ms). */
const FLASH_TTL_MS = 10 * 60 * 1000;
/** Sessions with unread flash messages kept at most (oldest dropped first): bounds memory. */
const FLASH_MAX_SESSIONS = 10_000;

/** Flash messages per session (by the hex of the session id's hash), read once. */
export class FlashStore {
  private readonly bySession = new Map<string, { items: Flash[]; expiresAt: number }>();
  constructor(private readonly now: () => number) {}

  /** Adds a message for the session's next page. */
  push(s: Session, f: Flash): void {
    const key = s.idHash.toString('hex');
    const now = this.now();
    const cur = this.bySession.get(key);
    if (cur && cur.expiresAt > now) {
      cur.items.push(f);
      cur.expiresAt = now + FLASH_TTL_MS;
      return;
    }
    this.bySession.delete(key);
    if (this.bySession.size >= FLASH_MAX_SESSIONS) {
      for (const [k, v] of this.bySession) if (v.expiresAt <= now) this.bySession.delete(k);
      if (this.bySession.size >= FLASH_MAX_SESSIONS) this.bySession.delete(this.bySession.keys().next().value!);
    }
    this.bySession.set(key, { items: [f], expiresAt: now + FLASH_TTL_MS });
  }

  /** Takes (and forgets) the session's messages. */
  take(s: Session): Flash[] {
    const key = s.idHash.toString('hex');
    const cur = this.bySession.get(key);
    this.bySession.delete(key);
    return cur && cur.expiresAt > this.now() ? cur.items : [];
  }
}

/** Security headers of every dashboard HTML answer. */
export function htmlHeaders(urls: PublicUrls): Record<string, string> {
  const extra = new Set<string>();
  // baseUrl's origin: where WHIP (`whipUrl`) is posted from "Go live from this browser".
  for (const u of [urls.cdnUrl, urls.authUrl, urls.baseUrl]) {
    try {
      extra.add(new URL(u).origin);
    } catch {
      /* configured URLs parse */
    }
  }
  const origins = [...extra].join(' ');
  return {
    'Content-Type': 'text/html; charset=utf-8',
    'Cache-Control': 'no-store',
    'X-Frame-Options': 'DENY',
    'X-Content-Type-Options': 'nosniff',
    'Referrer-Policy': 'same-origin',
    'Content-Security-Policy':
      `default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self' ${origins}; ` +
      `media-src 'self' blob: data: ${origins}; worker-src 'self' blob:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'`,
  };
}

/** The dashboard's access rules over the shared session store. */
export class Gate {
  readonly flash: FlashStore;
  constructor(
    readonly sessions: Sessions,
    private readonly accounts: AccountsRepo,
    private readonly urls: () => PublicUrls,
    now: () => number,
  ) {
    this.flash = new FlashStore(now);
  }

  /** The signed-in owner of the request's session, or null (no session, anonymous, account gone). */
  signed(req: WebRequest): Signed | null {
    return this.signedByCookie(req.headers.cookie);
  }

  /** The signed-in owner named by a `Cookie` header value, or null. */
  signedByCookie(cookie: string): Signed | null {
    const session = this.sessions.fromCookie(cookie);
    if (!session || !session.accountId) return null;
    const account = this.accounts.get(session.accountId);
    return account ? { session, account } : null;
  }

  /**
   * The pre-login token for the login form (kept from the request's cookie while fresh, else a new
   * one with `setCookie`): signed, nothing stored.
   */
  preLogin(req: WebRequest): { session: Session; setCookie?: string } {
    return this.sessions.preLogin(req.headers.cookie);
  }

  /**
   * Whether a mutation may proceed: `Origin` (when sent) is one of Skylark's public origins, and
   * `token` is the session's CSRF token (constant-time comparison).
   */
  mutationAllowed(req: WebRequest, session: Session, token: string | null | undefined): boolean {
    return this.sameOrigin(req.headers.origin) && this.sessions.checkCsrf(session, token);
  }

  /** Whether an `Origin` header value ('' when absent) is acceptable. */
  sameOrigin(origin: string | undefined): boolean {
    if (!origin) return true; // not sent (old browsers, same-origin GET-navigations): the CSRF token decides
    const u = this.urls();
    const allowed = new Set<string>();
    for (const x of [u.authUrl, u.baseUrl, u.cdnUrl]) {
      try {
        allowed.add(new URL(x).origin);
      } catch {
        /* configured URLs parse */
      }
    }
    return allowed.has(origin);
  }
}

/** A 303 to `location` (POST-redirect-GET). */
export function seeOther(location: string, headers: Record<string, string> = {}): WebReply {
  return { status: 303, headers: { Location: location, 'Cache-Control': 'no-store', ...headers } };
}

/** Whether `next` is a dashboard path to return to after signing in (no open redirect). */
export function safeNext(next: string | null | undefined): string {
  return next && /^\/dashboard(\/[A-Za-z0-9_\-/.]*)?$/.test(next) && !next.includes('//') && !next.includes('..') ? next : '/dashboard';
}
