/**
 * The dashboard (docs/behaviour.md §8): `/dashboard`, server-rendered HTML behind the owner login,
 * for API keys, streams (ingest settings, live listeners, player), webhooks (endpoints, event log,
 * test, redeliver), podcasts (episodes, upload, publish) and OAuth clients.
 *
 * - Sign-in reuses the owner login of the OAuth consent page: the same session cookie and store
 *   (src/sessions; before login a signed pre-login token, nothing stored), the same password check
 *   and per-account backoff (src/base/auth/owner-login.ts), the same per-IP limit.
 * - Every mutation is a POST form carrying the session's CSRF token (plus an `Origin` check), then
 *   POST-redirect-GET; one-time secrets are shown from the session's flash, never from a URL.
 * - Pages call the same services as the API (no second set of business rules), so they record the
 *   same events.
 * - Assets (CSS, a small script per page, hls.js) are served by Skylark at hashed URLs.
 */
import type { Feature } from '../../base/background.js';
import type { HttpServer, WebReply, WebRequest } from '../../base/http/server.js';
import type { Guard } from '../../base/auth/guard.js';
import type { PublicUrls } from '../../base/config.js';
import type { Logger } from '../../base/logger.js';
import type { Limits } from '../../base/limits/limits.js';
import type { AccountsRepo } from '../../base/db/accounts-repo.js';
import type { StreamsService } from '../services/streams.js';
import type { PodcastsService } from '../services/podcasts.js';
import type { EpisodesService } from '../services/episodes.js';
import type { PodcastStatsService } from '../services/podcast-stats.js';
import type { WebhooksService } from '../services/webhooks.js';
import type { EventsService } from '../services/events.js';
import type { AccountsService } from '../services/accounts.js';
import type { ListenersService } from '../services/listeners.js';
import type { ListenerTokens } from '../../base/auth/listener-tokens.js';
import type { OAuthClients } from '../oauth/clients.js';
import type { MediaStore } from '../episode-audio/store.js';
import type { Sessions } from '../../base/auth/sessions.js';
import type { UploadSettings } from '../api/services.js';
import { signInOwner } from '../../base/auth/owner-login.js';
import { registerAssets } from './assets.js';
import { Gate, safeNext, seeOther } from './gate.js';
import { badge, esc, loginPage, tableWrap, time } from './html.js';
import { Router } from './router.js';
import { registerKeyPages } from './keys.js';
import { registerStreamPages } from './streams.js';
import { registerWebhookPages } from './webhooks.js';
import { registerPodcastPages } from './podcasts.js';
import { registerOAuthClientPages } from './oauth-clients.js';

/** What the dashboard is given by the composition root (src/app/control.ts): the services the API calls too. */
export interface DashboardDeps {
  http: HttpServer;
  /** The per-client-IP limit of the login form, client addresses and the per-account login backoff. */
  guard: Pick<Guard, 'limitClient' | 'clientAddress' | 'logins'>;
  /** The owner's sign-in sessions: the same store and cookie as the OAuth consent page (one sign-in for both). */
  sessions: Sessions;
  /** Accounts as stored: the login's password check and the signed-in account of a session. */
  accountsRepo: AccountsRepo;
  /** API keys. */
  accounts: AccountsService;
  streams: StreamsService;
  podcasts: { podcasts: PodcastsService; episodes: EpisodesService; stats?: PodcastStatsService };
  /** Active listeners and stats of streams. */
  listeners: ListenersService;
  listenerTokens: ListenerTokens;
  /** The webhooks feature's services: a test event or redelivery wakes the dispatcher at once. */
  webhooks: { webhooks: WebhooksService; events: EventsService };
  /** Where episode audio is stored (uploads are written to its temp folder first). */
  episodeMedia: MediaStore;
  uploads: UploadSettings;
  oauthClients: OAuthClients;
  urls: () => PublicUrls;
  limits: Limits;
  log: Logger;
  now: () => number;
}

/** Registers every `/dashboard` route. */
export function registerDashboard(deps: DashboardDeps): Feature {
  const { http, now } = deps;
  const log = deps.log.child('dashboard');
  const gate = new Gate(deps.sessions, deps.accountsRepo, deps.urls, now);
  const assets = registerAssets(http, log);
  const router = new Router(http, gate, assets, deps.urls, log);
  const { webhooks, events } = deps.webhooks;

  registerLogin(deps, router, gate, assets);
  registerOverview(router, deps);
  registerKeyPages(router, deps.accounts);
  registerStreamPages(router, { streams: deps.streams, events, listeners: deps.listeners, listenerTokens: deps.listenerTokens, assets, now });
  registerWebhookPages(router, { webhooks, events, assets });
  registerPodcastPages(router, {
    http,
    gate,
    podcasts: deps.podcasts.podcasts,
    episodes: deps.podcasts.episodes,
    ...(deps.podcasts.stats ? { stats: deps.podcasts.stats } : {}),
    media: deps.episodeMedia,
    maxUploadBytes: deps.uploads.maxBytes,
    minFreeDiskBytes: deps.uploads.minFreeDiskBytes,
    limits: deps.limits,
    assets,
    log,
    now,
  });
  registerOAuthClientPages(router, deps.oauthClients, () => deps.urls().authUrl);
  return {};
}

/** `/dashboard/login` (GET form, POST credentials) and `POST /dashboard/logout`. */
function registerLogin(deps: DashboardDeps, router: Router, gate: Gate, assets: ReturnType<typeof registerAssets>): void {
  const { http, guard } = deps;
  const accounts = deps.accountsRepo;
  const page = (status: number, o: Parameters<typeof loginPage>[0], extra: Record<string, string> = {}): WebReply => router.html(status, loginPage(o), extra);

  http.web('get', '/dashboard/login', (req: WebRequest) => {
    const next = safeNext(req.query.get('next'));
    if (gate.signed(req)) return seeOther(next);
    const { session, setCookie } = gate.preLogin(req); // signed, nothing stored until a login succeeds
    return page(200, { assets, csrf: session.csrfToken, next }, setCookie ? { 'Set-Cookie': setCookie } : {});
  });

  http.web('post', '/dashboard/login', async (req: WebRequest) => {
    const headers: Record<string, string> = {};
    if (!guard.limitClient(req.remoteAddress, req.headers.forwardedFor, headers)) {
      return router.html(429, `<!doctype html><title>Too many requests</title><p>Too many sign-in attempts from your address; retry after ${esc(headers['Retry-After'] ?? '60')} seconds.</p>`, headers);
    }
    const form = new URLSearchParams(req.body.toString('utf8'));
    const next = safeNext(form.get('next'));
    if (gate.signed(req)) return seeOther(next, headers); // a stale form from before signing in elsewhere
    const s = gate.sessions.current(req.headers.cookie);
    if (!s || !gate.mutationAllowed(req, s, form.get('csrf_token'))) {
      const { session, setCookie } = gate.preLogin(req);
      return page(403, { assets, csrf: session.csrfToken, next, error: 'The sign-in form expired or was not sent by this page. Try again.' }, { ...headers, ...(setCookie ? { 'Set-Cookie': setCookie } : {}) });
    }
    const email = form.get('email') ?? '';
    const ip = guard.clientAddress(req.remoteAddress, req.headers.forwardedFor);
    const r = await signInOwner(accounts, guard.logins, email, form.get('password') ?? '', ip);
    if (r.kind === 'locked') {
      deps.limits.hit('login_backoff', ip);
      const wait = { ...headers, 'Retry-After': String(r.retryAfterS) };
      return page(429, { assets, csrf: s.csrfToken, next, email, error: `Too many failed sign-ins for this account. Try again in ${r.retryAfterS} seconds.` }, wait);
    }
    if (r.kind === 'busy') return page(503, { assets, csrf: s.csrfToken, next, email, error: 'The server is busy checking other sign-ins. Try again in a moment.' }, { ...headers, 'Retry-After': String(r.retryAfterS) });
    if (r.kind === 'wrong') return page(401, { assets, csrf: s.csrfToken, next, email, error: 'The email or password is wrong.' }, headers);
    const started = gate.sessions.start(r.account.id, s); // a new session id and CSRF token: no fixation
    return seeOther(next, { ...headers, 'Set-Cookie': started.setCookie });
  });

  http.web('post', '/dashboard/logout', (req: WebRequest) => {
    const s = gate.sessions.fromCookie(req.headers.cookie);
    const form = new URLSearchParams(req.body.toString('utf8'));
    if (!s || !gate.mutationAllowed(req, s, form.get('csrf_token'))) return seeOther('/dashboard/login');
    return seeOther('/dashboard/login', { 'Set-Cookie': gate.sessions.end(s) });
  });

  http.web('get', '/dashboard/', () => seeOther('/dashboard'));
}

/** `/dashboard`: what is live now and where to go. */
function registerOverview(router: Router, deps: DashboardDeps): void {
  router.get('/dashboard', (r) => {
    const live = deps.streams.list(r.account.id, 'live', { limit: 100 }, false).data;
    const recent = deps.streams.list(r.account.id, undefined, { limit: 5 }, false).data;
    const rows = (list: typeof live) =>
      list.map((s) => `<tr><td><a href="/dashboard/streams/${esc(s.id)}">${esc(s.title)}</a></td><td>${badge(s.status)}</td><td class="num">${s.listenerCount}</td><td>${time(s.startedAt ?? s.createdAt)}</td></tr>`);
    const listening = live.reduce((n, s) => n + s.listenerCount, 0);
    return r.page(
      'Overview',
      'overview',
      `<h1>${esc(r.account.name)}</h1>
<p class="lead">${esc(r.account.plan === 'paid' ? 'Paid plan' : 'Free plan')} · default region ${esc(r.account.default_region)}</p>
<div class="stats">
<div class="stat"><span class="stat-value">${live.length}</span><span class="stat-label">live streams</span></div>
<div class="stat"><span class="stat-value">${listening}</span><span class="stat-label">listening now</span></div>
</div>
<section aria-labelledby="live-now"><h2 id="live-now">Live now</h2>
${tableWrap('Live streams', ['Stream', 'Status', 'Listeners', 'Since'], rows(live), 'Nothing is live right now.')}
</section>
<section aria-labelledby="recent"><h2 id="recent">Recent streams</h2>
${tableWrap('Recent streams', ['Stream', 'Status', 'Listeners', 'Since'], rows(recent), 'No streams yet.')}
<p><a class="btn" href="/dashboard/streams">All streams and create →</a></p>
</section>`,
    );
  });
}
