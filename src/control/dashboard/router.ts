/**
 * Dashboard routes over `HttpServer.web()`: path parameters, the sign-in gate (pages redirect to
 * the login form, JSON answers 401), form parsing and the CSRF + Origin check of every POST, and
 * service errors (ApiError) turned into a flash message on the page the form came from.
 */
import type { HttpServer, WebReply, WebRequest } from '../../base/http/server.js';
import { ApiError, ERROR_CODES, type ErrorCode } from '../../base/errors/errors.js';
import type { Logger } from '../../base/logger.js';
import type { AssetUrls } from './assets.js';
import { errorBody, layout, type Flash, type PageFrame, type Section } from './html.js';
import { htmlHeaders, seeOther, type Gate, type Signed } from './gate.js';
import type { PublicUrls } from '../../base/config.js';

/** The answer of a JSON dashboard route (polled by page scripts) without a session. */
const NOT_SIGNED_IN_BODY = JSON.stringify({ error: 'not_signed_in' satisfies ErrorCode });

/** What a dashboard handler sees. */
export interface DashRequest extends Signed {
  req: WebRequest;
  /** Path parameters (`:name`), percent-decoded. */
  params: string[];
  /** The parsed form of a POST (empty for GET). */
  form: URLSearchParams;
  /** Renders a signed-in page (layout, navigation, this session's flash messages). */
  page(title: string, section: Section, body: string, o?: { status?: number; scripts?: string[] }): WebReply;
  /** Flash for the next page, then 303 to `location`. */
  redirect(location: string, flash?: Flash): WebReply;
}

type Handler = (r: DashRequest) => WebReply | Promise<WebReply>;

/** Splits `url` along `pattern` (`/dashboard/streams/:id`): the decoded parameters, or null. */
export function matchParams(pattern: string, url: string): string[] | null {
  const p = pattern.split('/');
  const u = url.split('/');
  if (p.length !== u.length) return null;
  const out: string[] = [];
  for (let i = 0; i < p.length; i++) {
    if (p[i]!.startsWith(':')) {
      try {
        out.push(decodeURIComponent(u[i]!));
      } catch {
        return null;
      }
    } else if (p[i] !== u[i]) return null;
  }
  return out;
}

/** Registers dashboard routes on the HTTP server. */
export class Router {
  constructor(
    private readonly http: HttpServer,
    private readonly gate: Gate,
    private readonly assets: AssetUrls,
    private readonly urls: () => PublicUrls,
    private readonly log: Logger,
  ) {}

  /** Security headers of HTML answers (computed per answer: the public URLs are known once listening). */
  headers(): Record<string, string> {
    return htmlHeaders(this.urls());
  }

  /** An HTML answer with the dashboard's security headers. */
  html(status: number, body: string, extra: Record<string, string> = {}): WebReply {
    return { status, headers: { ...this.headers(), ...extra }, body };
  }

  /** A signed-in GET page (or fragment). Without a session: 303 to the login form, back here after. */
  get(pattern: string, handler: Handler): void {
    this.route('get', pattern, handler, false, () => '/dashboard');
  }

  /**
   * A signed-in POST (form). CSRF token and Origin are checked before the handler runs. A service
   * error (ApiError) goes back to `back(params)` with its message as a flash.
   */
  post(pattern: string, back: (params: string[]) => string, handler: Handler): void {
    this.route('post', pattern, handler, false, back);
  }

  /** A signed-in JSON GET (polled by page scripts): 401 JSON without a session. */
  json(pattern: string, handler: (r: DashRequest) => unknown): void {
    const headers = { 'Content-Type': 'application/json; charset=utf-8', 'Cache-Control': 'no-store', 'X-Content-Type-Options': 'nosniff' };
    this.route('get', pattern, (r) => ({ status: 200, headers, body: JSON.stringify(handler(r)) }), true, () => '/dashboard');
  }

  private route(method: 'get' | 'post', pattern: string, handler: Handler, isJson: boolean, back: (params: string[]) => string): void {
    this.http.web(method, pattern, async (req) => {
      const params = matchParams(pattern, req.url) ?? [];
      const signed = this.gate.signed(req);
      if (!signed) {
        if (isJson) return { status: ERROR_CODES.not_signed_in.status, headers: { 'Content-Type': 'application/json; charset=utf-8', 'Cache-Control': 'no-store' }, body: NOT_SIGNED_IN_BODY };
        if (method === 'get') return seeOther(`/dashboard/login?next=${encodeURIComponent(req.url)}`);
        return seeOther('/dashboard/login');
      }
      let form = new URLSearchParams();
      if (method === 'post') {
        if (!/^application\/x-www-form-urlencoded\s*(;|$)/i.test(req.headers.contentType)) {
          return this.html(400, this.frame(signed, 'Bad request', 'none', errorBody('Bad request', 'Forms are sent as application/x-www-form-urlencoded.')));
        }
        form = new URLSearchParams(req.body.toString('utf8'));
        if (!this.gate.mutationAllowed(req, signed.session, form.get('csrf_token'))) {
          return this.html(403, this.frame(signed, 'Request refused', 'none', errorBody('Request refused', 'The form is stale or was not sent by this dashboard (CSRF check failed). Reload the page and try again.')));
        }
      }
      const r: DashRequest = {
        ...signed,
        req,
        params,
        form,
        page: (title, section, body, o = {}) => this.html(o.status ?? 200, this.frame(signed, title, section, body, o.scripts)),
        redirect: (location, flash) => {
          if (flash) this.gate.flash.push(signed.session, flash);
          return seeOther(location);
        },
      };
      try {
        return await handler(r);
      } catch (e) {
        if (!(e instanceof ApiError)) throw e;
        if (e.status === 404 && method === 'get') return r.page('Not found', 'none', errorBody('Not found', e.message), { status: 404 });
        if (isJson) return { status: e.status, headers: { 'Content-Type': 'application/json; charset=utf-8', 'Cache-Control': 'no-store' }, body: JSON.stringify({ error: e.code, message: e.message }) };
        if (method === 'post') return r.redirect(back(params), { error: e.message });
        this.log.warn('dashboard page error', { url: req.url, code: e.code });
        return r.page('Error', 'none', errorBody('Something went wrong', e.message), { status: e.status });
      }
    });
  }

  /** The full HTML of a signed-in page. */
  frame(s: Signed, title: string, section: Section, body: string, scripts?: string[]): string {
    const frame: PageFrame = {
      assets: this.assets,
      csrf: s.session.csrfToken,
      accountName: s.account.name,
      email: s.account.owner_email ?? '',
      section,
      flash: this.gate.flash.take(s.session),
      ...(scripts ? { scripts } : {}),
    };
    return layout(title, frame, body);
  }
}
