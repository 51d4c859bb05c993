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
import type { AppContext, Feature } from '../../context.js';
import type { WebReply, WebRequest } from '../../base/http/server.js';
import type { StreamsService } from '../services/streams.js';
import type { PodcastsService } from '../services/podcasts.js';
import type { EpisodesService } from '../services/episodes.js';
import type { PodcastStatsService } from '../services/podcast-stats.js';
import type { ListenerRegistry } from '../../delivery/listeners/registry.js';
import type { WebhooksService } from '../services/webhooks.js';
import type { EventsService } from '../services/events.js';
import { AccountsService } from '../services/accounts.js';
import { ListenersService } from '../../delivery/listeners/service.js';
import { ListenerTokens } from '../../base/auth/listener-tokens.js';
import { OAuthRepo } from '../../base/db/oauth-repo.js';
import { OAuthClients } from '../oauth/clients.js';
import { MediaStore } from '../episode-audio/store.js';
import { Sessions } from '../../base/auth/sessions.js';
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

/** Services built by other features that the dashboard calls (handed over by the composition root). */
export interface DashboardDeps {
  streams: StreamsService;
  podcasts: { podcasts: PodcastsService; episodes: EpisodesService; stats?: PodcastStatsService };
  listeners: ListenerRegistry;
  /** The webhooks feature's services: a test event or redelivery wakes the delivery engine at once. */
  webhooks: { webhooks: WebhooksService; events: EventsService };
}

/** Registers every `/dashboard` route. */
export function registerDashboard(ctx: AppContext, deps: DashboardDeps): Feature {
  const { http, db, now } = ctx;
  const log = ctx.log.child('dashboard');
  // The same session store and cookie as the OAuth consent page (one sign-in for both).
  const sessions = new Sessions(db, ctx.nodeSecret, () => ctx.urls().authUrl.startsWith('https:'), now);
  const gate = new Gate(sessions, ctx.accounts, ctx.urls, now);
  const assets = registerAssets(http, log);
  const router = new Router(http, gate, assets, ctx.urls, log);

  const accounts = new AccountsService(ctx.accounts, now);
  const { webhooks, events } = deps.webhooks;
  const listenerTokens = new ListenerTokens(ctx.nodeSecret, now);
  const listeners = new ListenersService(deps.listeners, ctx.streams, listenerTokens);

  registerLogin(ctx, router, gate, assets);
  registerOverview(router, deps);
  registerKeyPages(router, accounts);
  registerStreamPages(router, { streams: deps.streams, events, listeners, listenerTokens, assets, now });
  registerWebhookPages(router, { webhooks, events, assets });
  registerPodcastPages(router, {
    http,
    gate,
    podcasts: deps.podcasts.podcasts,
    episodes: deps.podcasts.episodes,
    ...(deps.podcasts.stats ? { stats: deps.podcasts.stats } : {}),
    media: new MediaStore(ctx.config.dataDir),
    maxUploadBytes: ctx.config.maxUploadBytes,
    minFreeDiskBytes: ctx.config.limits.minFreeDiskBytes,
    limits: ctx.limits,
    assets,
    log,
    now,
  });
  registerOAuthClientPages(router, new OAuthClients(new OAuthRepo(db), now), () => ctx.urls().authUrl);
  return {};
}

/** `/dashboard/login` (GET form, POST credentials) and `POST /dashboard/logout`. */
function registerLogin(ctx: AppContext, router: Router, gate: Gate, assets: ReturnType<typeof registerAssets>): void {
  const { http, guard, accounts } = ctx;
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
      ctx.limits.hit('login_backoff', ip);
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
