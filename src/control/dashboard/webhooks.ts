/**
 * Webhooks pages: endpoints (create, edit url/description/events, disable/enable, roll the signing
 * secret, delete), "Send test event", and the event log with every delivery attempt (time, response
 * code, duration, error, next retry), "Redeliver", undelivered deliveries highlighted. The log is a
 * fragment that `assets/webhooks.js` re-fetches every few seconds, so a test event's attempt shows
 * up without a reload. Mutations go through WebhooksService and EventsService, like the API.
 */
import { parse } from '../api/validation.js';
import { CreateWebhook, EVENT_TYPES, UpdateWebhook } from '../api/webhooks/schemas.js';
import type { WebhooksService, WebhookObject } from '../services/webhooks.js';
import type { EventsService, EventWithDeliveries } from '../services/events.js';
import type { AssetUrls } from './assets.js';
import type { WebReply } from '../../base/http/server.js';
import { unconfirmed } from './confirm.js';
import { badge, csrfField, esc, postButton, tableWrap, time } from './html.js';
import type { DashRequest, Router } from './router.js';
import { safeNext } from './gate.js';

/** Events shown in a log. */
const LOG_EVENTS = 20;
/** Events scanned for one endpoint's log. */
const LOG_SCAN = 100;

export interface WebhookPagesDeps {
  webhooks: WebhooksService;
  events: EventsService;
  assets: AssetUrls;
}

/** Registers `/dashboard/webhooks…` and `/dashboard/events/:id/redeliver`. */
export function registerWebhookPages(router: Router, d: WebhookPagesDeps): void {
  const back = (p: string[]) => `/dashboard/webhooks/${p[0]}`;
  router.get('/dashboard/webhooks', (r) => webhooksPage(d, r));
  router.get('/dashboard/webhooks/log', (r) => router.html(200, logHtml(d, r.account.id, r.session.csrfToken, '/dashboard/webhooks')));
  router.post('/dashboard/webhooks', () => '/dashboard/webhooks', (r) => createWebhook(d, r));
  router.get('/dashboard/webhooks/:id', (r) => webhookPage(d, r));
  router.get('/dashboard/webhooks/:id/log', (r) => webhookLog(d, router, r));
  router.post('/dashboard/webhooks/:id', back, (r) => updateWebhook(d, r));
  router.post('/dashboard/webhooks/:id/status', back, (r) => setWebhookStatus(d, r));
  router.post('/dashboard/webhooks/:id/test', back, (r) => testWebhook(d, r));
  router.post('/dashboard/webhooks/:id/roll_secret', back, (r) => rollSecret(d, r));
  router.post('/dashboard/webhooks/:id/delete', back, (r) => deleteWebhook(d, r));
  router.post('/dashboard/events/:id/redeliver', () => '/dashboard/webhooks', (r) => redeliver(d, r));
}

/** The newest events with their deliveries; for one endpoint, only events delivered to it. */
function eventLog(d: WebhookPagesDeps, accountId: string, webhookId?: string): EventWithDeliveries[] {
  const out: EventWithDeliveries[] = [];
  for (const e of d.events.list(accountId, undefined, { limit: webhookId ? LOG_SCAN : LOG_EVENTS }).data) {
    const full = d.events.get(accountId, e.id);
    if (webhookId) {
      full.deliveries = full.deliveries.filter((x) => x.webhookId === webhookId);
      if (full.deliveries.length === 0) continue;
    }
    out.push(full);
    if (out.length >= LOG_EVENTS) break;
  }
  return out;
}

/** The event log fragment (see `eventLogHtml`; endpoints are named by their URL, looked up once each). */
function logHtml(d: WebhookPagesDeps, accountId: string, csrf: string, back: string, webhookId?: string): string {
  const urls = new Map<string, string>();
  const urlOf = (id: string) => {
    if (!urls.has(id)) {
      try {
        urls.set(id, d.webhooks.get(accountId, id).url);
      } catch {
        urls.set(id, `${id} (deleted)`);
      }
    }
    return urls.get(id)!;
  };
  return eventLogHtml(eventLog(d, accountId, webhookId), csrf, back, urlOf, webhookId);
}

/** GET `/dashboard/webhooks`: the endpoints, the add form and the event log. */
function webhooksPage(d: WebhookPagesDeps, r: DashRequest): WebReply {
  const list = d.webhooks.list(r.account.id, undefined, { limit: 100 }).data;
  const csrf = r.session.csrfToken;
  const rows = list.map(
    (w) => `<tr><td><a href="/dashboard/webhooks/${esc(w.id)}" class="break">${esc(w.url)}</a>${w.description ? `<div class="muted small">${esc(w.description)}</div>` : ''}</td>
<td>${w.events.map((e) => `<code>${esc(e)}</code>`).join(' ')}</td><td>${badge(w.status)}</td><td>${time(w.createdAt)}</td></tr>`,
  );
  return r.page(
    'Webhooks',
    'webhooks',
    `<h1>Webhooks</h1>
<p class="lead">Skylark POSTs signed events to your endpoints and retries after 1 min, 5 min, 30 min, 2 h and 8 h.</p>
<section class="card" aria-labelledby="add-endpoint">
<h2 id="add-endpoint">Add an endpoint</h2>
<form method="post" action="/dashboard/webhooks" class="stack">${csrfField(csrf)}
<div class="field"><label for="wh-url">Endpoint URL</label><input id="wh-url" name="url" type="url" required maxlength="2048" placeholder="https://example.com/webhooks"></div>
<div class="field"><label for="wh-desc">Description <span class="muted">(optional)</span></label><input id="wh-desc" name="description" maxlength="500"></div>
${eventsFieldset('wh-ev', ['*'])}
<div><button type="submit" class="btn btn-primary">Add endpoint</button></div>
</form>
</section>
<section aria-labelledby="endpoints"><h2 id="endpoints">Endpoints</h2>
${tableWrap('Webhook endpoints', ['URL', 'Events', 'Status', 'Created'], rows, 'No endpoints yet.')}
</section>
<section aria-labelledby="log-title"><h2 id="log-title">Event log</h2>
<div id="event-log" data-refresh-url="/dashboard/webhooks/log" aria-live="polite">${logHtml(d, r.account.id, csrf, '/dashboard/webhooks')}</div>
</section>`,
    { scripts: [d.assets.webhooks] },
  );
}

/** POST `/dashboard/webhooks`: adds an endpoint; its signing secret is shown once. */
async function createWebhook(d: WebhookPagesDeps, r: DashRequest): Promise<WebReply> {
  const input: Record<string, unknown> = { url: r.form.get('url') ?? '', events: r.form.getAll('events') };
  const desc = r.form.get('description');
  if (desc) input.description = desc;
  const w = await d.webhooks.create(r.account.id, parse(CreateWebhook, input));
  return r.redirect(`/dashboard/webhooks/${w.id}`, {
    notice: 'Endpoint added.',
    secret: { label: 'Signing secret', value: w.signingSecret!, note: 'Verify every request with this secret (Service-Signature). It is shown only now; roll it to get a new one.' },
  });
}

/** GET `/dashboard/webhooks/:id`: the endpoint's actions, settings and deliveries. */
function webhookPage(d: WebhookPagesDeps, r: DashRequest): WebReply {
  const w = d.webhooks.get(r.account.id, r.params[0]!);
  const csrf = r.session.csrfToken;
  const base = `/dashboard/webhooks/${w.id}`;
  return r.page(
    'Webhook endpoint',
    'webhooks',
    `<p class="crumbs"><a href="/dashboard/webhooks">Webhooks</a> /</p>
<h1 class="break">${esc(w.url)} ${badge(w.status)}</h1>
<div class="actions">
${w.status === 'active' ? postButton(`${base}/test`, csrf, 'Send test event', { cls: 'btn btn-primary' }) : ''}
${postButton(`${base}/status`, csrf, w.status === 'active' ? 'Disable' : 'Enable', { fields: { status: w.status === 'active' ? 'disabled' : 'active' } })}
${postButton(`${base}/roll_secret`, csrf, 'Roll secret…')}
${postButton(`${base}/delete`, csrf, 'Delete…', { cls: 'btn btn-danger' })}
</div>
<section class="card" aria-labelledby="edit-endpoint">
<h2 id="edit-endpoint">Settings</h2>
${editForm(w, csrf)}
</section>
<section aria-labelledby="log-title"><h2 id="log-title">Deliveries to this endpoint</h2>
<div id="event-log" data-refresh-url="${base}/log" aria-live="polite">${logHtml(d, r.account.id, csrf, base, w.id)}</div>
</section>`,
    { scripts: [d.assets.webhooks] },
  );
}

/** GET `/dashboard/webhooks/:id/log`: the endpoint's deliveries (the fragment the page re-fetches). */
function webhookLog(d: WebhookPagesDeps, router: Router, r: DashRequest): WebReply {
  const w = d.webhooks.get(r.account.id, r.params[0]!);
  return router.html(200, logHtml(d, r.account.id, r.session.csrfToken, `/dashboard/webhooks/${w.id}`, w.id));
}

/** POST `/dashboard/webhooks/:id`: saves the URL, description and events. */
async function updateWebhook(d: WebhookPagesDeps, r: DashRequest): Promise<WebReply> {
  const desc = r.form.get('description') ?? '';
  const input = { url: r.form.get('url') ?? '', events: r.form.getAll('events'), description: desc === '' ? null : desc };
  const w = await d.webhooks.update(r.account.id, r.params[0]!, parse(UpdateWebhook, input));
  return r.redirect(`/dashboard/webhooks/${w.id}`, { notice: 'Endpoint saved.' });
}

/** POST `/dashboard/webhooks/:id/status`: enables or disables the endpoint. */
async function setWebhookStatus(d: WebhookPagesDeps, r: DashRequest): Promise<WebReply> {
  const w = await d.webhooks.update(r.account.id, r.params[0]!, parse(UpdateWebhook, { status: r.form.get('status') ?? '' }));
  return r.redirect(`/dashboard/webhooks/${w.id}`, { notice: w.status === 'active' ? 'Endpoint enabled: pending deliveries resume.' : 'Endpoint disabled: it gets no new events and no attempts.' });
}

/** POST `/dashboard/webhooks/:id/test`: sends a test event to the endpoint. */
function testWebhook(d: WebhookPagesDeps, r: DashRequest): WebReply {
  const e = d.webhooks.test(r.account.id, r.params[0]!);
  return r.redirect(`/dashboard/webhooks/${r.params[0]}`, { notice: `Test event ${e.id} sent; its delivery appears below.` });
}

/** POST `/dashboard/webhooks/:id/roll_secret`: a new signing secret (shown once), once confirmed. */
function rollSecret(d: WebhookPagesDeps, r: DashRequest): WebReply {
  const w = d.webhooks.get(r.account.id, r.params[0]!);
  const ask = unconfirmed(r, 'Roll signing secret', 'webhooks', {
    title: 'Roll the signing secret?',
    message: `Every request to ${w.url} from now on (retries included) is signed with a new secret; update your receiver at once.`,
    action: `/dashboard/webhooks/${w.id}/roll_secret`,
    button: 'Roll secret',
    back: `/dashboard/webhooks/${w.id}`,
  });
  if (ask) return ask;
  const rolled = d.webhooks.rollSecret(r.account.id, w.id);
  return r.redirect(`/dashboard/webhooks/${w.id}`, { secret: { label: 'New signing secret', value: rolled.signingSecret!, note: 'Requests are signed with it from now on. It is shown only now.' } });
}

/** POST `/dashboard/webhooks/:id/delete`: deletes the endpoint, once confirmed. */
function deleteWebhook(d: WebhookPagesDeps, r: DashRequest): WebReply {
  const w = d.webhooks.get(r.account.id, r.params[0]!);
  const ask = unconfirmed(r, 'Delete endpoint', 'webhooks', {
    title: 'Delete this endpoint?',
    message: `${w.url} gets no more events; its pending deliveries end undelivered.`,
    action: `/dashboard/webhooks/${w.id}/delete`,
    button: 'Delete endpoint',
    back: `/dashboard/webhooks/${w.id}`,
  });
  if (ask) return ask;
  d.webhooks.delete(r.account.id, w.id);
  return r.redirect('/dashboard/webhooks', { notice: `Endpoint ${w.url} deleted.` });
}

/** POST `/dashboard/events/:id/redeliver`: queues the event again (to one endpoint with `webhook_id`), then back to the page it came from. */
function redeliver(d: WebhookPagesDeps, r: DashRequest): WebReply {
  const webhookId = r.form.get('webhook_id') || undefined;
  const e = d.events.redeliver(r.account.id, r.params[0]!, webhookId);
  return r.redirect(safeNext(r.form.get('back')), { notice: `Event ${e.id} queued for delivery again.` });
}

/** The event-type checkboxes (`*` = all). */
function eventsFieldset(idPrefix: string, checked: string[]): string {
  const all = ['*', ...EVENT_TYPES];
  return `<fieldset class="checks"><legend>Events</legend>${all
    .map(
      (t, i) =>
        `<label for="${idPrefix}-${i}"><input type="checkbox" id="${idPrefix}-${i}" name="events" value="${esc(t)}"${checked.includes(t) ? ' checked' : ''}> ${t === '*' ? 'All events (<code>*</code>)' : `<code>${esc(t)}</code>`}</label>`,
    )
    .join('')}</fieldset>`;
}

function editForm(w: WebhookObject, csrf: string): string {
  return `<form method="post" action="/dashboard/webhooks/${esc(w.id)}" class="stack">${csrfField(csrf)}
<div class="field"><label for="edit-url">Endpoint URL</label><input id="edit-url" name="url" type="url" required maxlength="2048" value="${esc(w.url)}"></div>
<div class="field"><label for="edit-desc">Description</label><input id="edit-desc" name="description" maxlength="500" value="${esc(w.description ?? '')}"></div>
${eventsFieldset('edit-ev', w.events)}
<div><button type="submit" class="btn btn-primary">Save</button></div>
</form>`;
}

/**
 * The event log: one card per event, each delivery with its status, next retry and every attempt.
 * Undelivered deliveries are highlighted; pending ones mark the log `data-pending`.
 */
export function eventLogHtml(events: EventWithDeliveries[], csrf: string, back: string, urlOf: (webhookId: string) => string, onlyWebhook?: string): string {
  if (events.length === 0) return '<p class="muted">No events yet.</p>';
  return `<ol class="event-log">${events
    .map((e) => {
      const undelivered = e.deliveries.some((x) => x.status === 'undelivered');
      const deliveries =
        e.deliveries.length === 0
          ? '<p class="muted small">No endpoint subscribed to this event.</p>'
          : e.deliveries
              .map((dl) => {
                const attempts = dl.attempts.map(
                  (a) =>
                    `<tr><td>${time(a.attemptedAt)}</td><td>${a.responseStatus === null ? '<span class="muted">none</span>' : `<span class="code code-${Math.floor(a.responseStatus / 100)}xx">${a.responseStatus}</span>`}</td><td class="num">${a.durationMs} ms</td><td>${a.error ? esc(a.error) : ''}</td></tr>`,
                );
                return `<div class="delivery delivery-${esc(dl.status)}"${dl.status === 'pending' ? ' data-pending="true"' : ''}>
<p>${onlyWebhook ? '' : `<span class="break">${esc(urlOf(dl.webhookId))}</span> `}${badge(dl.status)}${dl.nextAttemptAt ? ` <span class="small">next retry ${time(dl.nextAttemptAt)}</span>` : ''}</p>
${tableWrap(`Attempts of ${e.id}`, ['Time', 'Response', 'Duration', 'Error'], attempts, dl.status === 'pending' ? 'No attempt yet: the first is due now.' : 'No attempts.')}
</div>`;
              })
              .join('');
      return `<li class="event${undelivered ? ' event-undelivered' : ''}">
<div class="event-head"><code>${esc(e.type)}</code>${e.livemode ? '' : ' <span class="badge badge-test">test</span>'}${undelivered ? ' <span class="badge badge-undelivered">undelivered</span>' : ''}
<span class="mono small muted">${esc(e.id)}</span> ${time(new Date(e.created * 1000).toISOString())}
${postButton(`/dashboard/events/${e.id}/redeliver`, csrf, 'Redeliver', { cls: 'btn btn-small', fields: { back, ...(onlyWebhook ? { webhook_id: onlyWebhook } : {}) }, ariaLabel: `Redeliver ${e.type} ${e.id}` })}</div>
${deliveries}
</li>`;
    })
    .join('')}</ol>`;
}
