/**
 * The streams pages' routes (docs/dashboard.md "Pages"): the list with status badges and a create
 * form; a stream's page (its cards: stream-cards.ts) and `live.json`, the sample `assets/stream.js`
 * polls to keep the page current (status, listeners, what plays now and the play log, recent
 * `stream.error` events, loudness); and the page's forms: recording, fallback, now playing, a
 * listener or publish token, a new stream key, delete. Mutations go through StreamsService, like
 * `/v2/streams`.
 */
import { parse } from '../api/validation.js';
import { CreateStream, CODECS, QUALITIES, SetNowPlaying, UpdateStream } from '../api/streams/schemas.js';
import type { StreamsService } from '../services/streams.js';
import type { EventsService } from '../services/events.js';
import type { ListenersService } from '../services/listeners.js';
import type { ListenerTokens } from '../../base/auth/listener-tokens.js';
import type { AssetUrls } from './assets.js';
import type { WebReply } from '../../base/http/server.js';
import { unconfirmed } from './confirm.js';
import { badge, csrfField, esc, tableWrap, time } from './html.js';
import type { DashRequest, Router } from './router.js';
import { streamPageBody, type StreamErrorItem, type StreamLive } from './stream-cards.js';

/** Recent errors shown at most. */
const ERRORS_SHOWN = 10;
/** Newest tracks of the play log shown. */
const TRACKS_SHOWN = 20;
/** Newest broadcasts shown. */
const BROADCASTS_SHOWN = 20;
/** `stream.error` events of the account scanned for this stream's (newest first). */
const ERRORS_SCANNED = 100;

export interface StreamPagesDeps {
  streams: StreamsService;
  events: EventsService;
  listeners: ListenersService;
  listenerTokens: ListenerTokens;
  assets: AssetUrls;
  now: () => number;
}

/** Registers `/dashboard/streams…`. */
export function registerStreamPages(router: Router, d: StreamPagesDeps): void {
  const back = (p: string[]) => `/dashboard/streams/${p[0]}`;
  router.get('/dashboard/streams', (r) => streamsPage(d, r));
  router.post('/dashboard/streams', () => '/dashboard/streams', (r) => createStream(d, r));
  router.get('/dashboard/streams/:id', (r) => streamPage(d, r));
  router.json('/dashboard/streams/:id/live.json', (r) => streamLive(d, r.account.id, r.params[0]!));
  router.post('/dashboard/streams/:id/recording', back, (r) => setRecording(d, r));
  router.post('/dashboard/streams/:id/fallback', back, (r) => setFallback(d, r));
  router.post('/dashboard/streams/:id/now_playing', back, (r) => setNowPlaying(d, r));
  router.post('/dashboard/streams/:id/listener_token', back, (r) => listenerToken(d, r));
  router.post('/dashboard/streams/:id/publish_token', back, (r) => publishToken(d, r));
  router.post('/dashboard/streams/:id/reset_key', back, (r) => resetKey(d, r));
  router.post('/dashboard/streams/:id/delete', back, (r) => deleteStream(d, r));
}

/** The newest `stream.error` events of the stream (at most `ERRORS_SHOWN`, among the account's `ERRORS_SCANNED` newest). */
function streamErrors(d: StreamPagesDeps, accountId: string, streamId: string): StreamErrorItem[] {
  const out: StreamErrorItem[] = [];
  for (const e of d.events.list(accountId, 'stream.error', { limit: ERRORS_SCANNED }).data) {
    const obj = e.data.object as { id?: string } | null;
    if (obj?.id !== streamId) continue;
    const err = (e.data.error ?? {}) as { code?: string; message?: string };
    out.push({ id: e.id, created: new Date(e.created * 1000).toISOString(), code: String(err.code ?? 'error'), message: String(err.message ?? '') });
    if (out.length >= ERRORS_SHOWN) break;
  }
  return out;
}

/** What the stream page polls (`live.json`), now. */
function streamLive(d: StreamPagesDeps, accountId: string, id: string): StreamLive {
  const s = d.streams.get(accountId, id, false);
  const st = d.listeners.stats(accountId, id);
  return {
    status: s.status,
    source: s.source,
    startedAt: s.startedAt,
    endedAt: s.endedAt,
    listenerCount: st.listenerCount,
    peakListenerCount: st.peakListenerCount,
    totalListeners: st.totalListeners,
    averageListenDurationSeconds: st.averageListenDurationSeconds,
    countries: st.countries,
    nowPlaying: s.nowPlaying,
    tracks: d.streams.tracks(accountId, id, { limit: TRACKS_SHOWN }).data,
    errors: streamErrors(d, accountId, id),
    loudness: d.streams.loudness(accountId, id),
    at: new Date(d.now()).toISOString(),
  };
}

/** GET `/dashboard/streams`: the list (50 a page, `?after=`) and the create form. */
function streamsPage(d: StreamPagesDeps, r: DashRequest): WebReply {
  const after = r.req.query.get('after') ?? undefined;
  const page = d.streams.list(r.account.id, undefined, { limit: 50, after }, false);
  const rows = page.data.map(
    (s) => `<tr><td><a href="/dashboard/streams/${esc(s.id)}">${esc(s.title)}</a><div class="muted mono small">${esc(s.id)}</div></td>
<td>${badge(s.status)}</td><td>${esc(s.codec.toUpperCase())} · ${esc(s.quality)}</td><td class="num">${s.listenerCount}</td><td>${time(s.createdAt)}</td></tr>`,
  );
  const last = page.data[page.data.length - 1];
  return r.page(
    'Streams',
    'streams',
    `<h1>Streams</h1>
<section class="card" aria-labelledby="create-stream">
<h2 id="create-stream">Create a stream</h2>
<form method="post" action="/dashboard/streams" class="grid-form">${csrfField(r.session.csrfToken)}
<div class="field span-2"><label for="stream-title">Title</label><input id="stream-title" name="title" required maxlength="200"></div>
<div class="field"><label for="stream-codec">Codec</label><select id="stream-codec" name="codec">${CODECS.map((c) => `<option value="${c}">${c.toUpperCase()}</option>`).join('')}</select></div>
<div class="field"><label for="stream-quality">Quality</label><select id="stream-quality" name="quality">${QUALITIES.map((q) => `<option value="${q}"${q === 'medium' ? ' selected' : ''}>${q}</option>`).join('')}</select></div>
<div class="field"><label for="stream-playback">Playback</label><select id="stream-playback" name="playback"><option value="public">Public</option><option value="token">Listener token required</option></select></div>
<div class="field"><label for="stream-latency">Latency</label><select id="stream-latency" name="latencyMode"><option value="standard">Standard (classic HLS, ~6 s, cheapest per listener)</option><option value="low">Low (LL-HLS, ~2 s, more server work per listener)</option></select></div>
<div class="field field-end"><button type="submit" class="btn btn-primary">Create stream</button></div>
</form>
</section>
<section aria-labelledby="streams-list"><h2 id="streams-list">Your streams</h2>
${tableWrap('Streams', ['Title', 'Status', 'Audio', 'Listeners', 'Created'], rows, 'No streams yet: create one above, then point OBS or FFmpeg at it.')}
${page.hasMore && last ? `<p><a href="/dashboard/streams?after=${esc(last.id)}">Older streams →</a></p>` : ''}
</section>`,
  );
}

/** POST `/dashboard/streams`: creates a stream, then shows it. */
function createStream(d: StreamPagesDeps, r: DashRequest): WebReply {
  const input: Record<string, unknown> = { title: r.form.get('title') ?? '' };
  for (const k of ['codec', 'quality', 'playback', 'latencyMode'] as const) {
    const v = r.form.get(k);
    if (v) input[k] = v;
  }
  const s = d.streams.create(r.account.id, parse(CreateStream, input)).value;
  return r.redirect(`/dashboard/streams/${s.id}`, { notice: `Stream “${s.title}” created. Paste the server and stream key into OBS to go live.` });
}

/** GET `/dashboard/streams/:id`: the stream's page (its cards are kept current by `assets/stream.js`). */
function streamPage(d: StreamPagesDeps, r: DashRequest): WebReply {
  const s = d.streams.get(r.account.id, r.params[0]!, true);
  const l = streamLive(d, r.account.id, s.id);
  const broadcasts = d.streams.broadcasts(r.account.id, s.id, { limit: BROADCASTS_SHOWN }).data;
  return r.page(s.title, 'streams', streamPageBody(s, l, broadcasts, r.session.csrfToken, d.assets.hls), { scripts: [d.assets.stream, d.assets.golive] });
}

/** POST `/dashboard/streams/:id/recording`: sets (or clears) the podcast every broadcast is recorded into. */
function setRecording(d: StreamPagesDeps, r: DashRequest): WebReply {
  const podcastId = r.form.get('podcastId')?.trim() ?? '';
  const auto = r.form.get('publish') === 'auto';
  const zone = r.form.get('timeZone')?.trim();
  const recording = podcastId ? { podcastId, ...(auto ? { publish: 'auto' } : {}) } : null;
  const s = d.streams.update(r.account.id, r.params[0]!, parse(UpdateStream, { recording, ...(zone ? { timeZone: zone } : {}) }), false).value;
  return r.redirect(`/dashboard/streams/${s.id}`, { notice: s.recording ? `Every broadcast is recorded into podcast ${s.recording.podcastId}.` : 'Broadcasts are not recorded.' });
}

/** POST `/dashboard/streams/:id/fallback`: sets (or clears, with no episodes) the stream's fallback. @throws ApiError 400 as the API answers a bad fallback */
function setFallback(d: StreamPagesDeps, r: DashRequest): WebReply {
  const episodeIds = (r.form.get('episodeIds') ?? '').split(/[\s,]+/).filter(Boolean);
  const silence = r.form.get('silenceSeconds')?.trim() ?? '';
  const fallback = episodeIds.length ? { episodeIds, order: r.form.get('order') ?? 'sequential', silenceSeconds: silence === '' ? null : Number(silence) } : null;
  const s = d.streams.update(r.account.id, r.params[0]!, parse(UpdateStream, { fallback }), false).value;
  const n = s.fallback?.episodeIds.length ?? 0;
  return r.redirect(`/dashboard/streams/${s.id}`, { notice: s.fallback ? `The fallback plays ${n} episode${n === 1 ? '' : 's'}.` : 'The stream has no fallback.' });
}

/** POST `/dashboard/streams/:id/now_playing`: sets what plays now. */
function setNowPlaying(d: StreamPagesDeps, r: DashRequest): WebReply {
  const input: Record<string, unknown> = { title: r.form.get('title') ?? '' };
  const artist = r.form.get('artist')?.trim();
  if (artist) input.artist = artist;
  const s = d.streams.setNowPlaying(r.account.id, r.params[0]!, parse(SetNowPlaying, input), false);
  const np = s.nowPlaying!;
  return r.redirect(`/dashboard/streams/${s.id}`, { notice: `Now playing: ${np.artist ? `${np.artist} – ` : ''}${np.title}.` });
}

/**
 * POST `/dashboard/streams/:id/listener_token`: a listener token for the page's player (token
 * streams), by POST with the CSRF token: it is a credential, so it is answered as JSON and never
 * put in the page's URL.
 */
async function listenerToken(d: StreamPagesDeps, r: DashRequest): Promise<WebReply> {
  const s = d.streams.get(r.account.id, r.params[0]!, false);
  const { token } = await d.listenerTokens.sign(s.id, 'dashboard');
  return { status: 200, headers: { 'Content-Type': 'application/json; charset=utf-8', 'Cache-Control': 'no-store' }, body: JSON.stringify({ token }) };
}

/**
 * POST `/dashboard/streams/:id/publish_token`: a publish token for "Go live from this browser"
 * (docs/behaviour.md §18): the page publishes over WHIP with it, never with the stream key.
 */
async function publishToken(d: StreamPagesDeps, r: DashRequest): Promise<WebReply> {
  const t = await d.streams.createPublishToken(r.account.id, r.params[0]!);
  return { status: 200, headers: { 'Content-Type': 'application/json; charset=utf-8', 'Cache-Control': 'no-store' }, body: JSON.stringify({ token: t.token, whipUrl: t.whipUrl, expiresAt: t.expiresAt }) };
}

/** POST `/dashboard/streams/:id/reset_key`: a new stream key, once confirmed. */
function resetKey(d: StreamPagesDeps, r: DashRequest): WebReply {
  const s = d.streams.get(r.account.id, r.params[0]!, false);
  const ask = unconfirmed(r, 'Reset stream key', 'streams', {
    title: `Reset the stream key of “${s.title}”?`,
    message: 'A new key replaces the current one; a publisher using the old key is disconnected and must use the new key.',
    action: `/dashboard/streams/${s.id}/reset_key`,
    button: 'Reset key',
    back: `/dashboard/streams/${s.id}`,
  });
  if (ask) return ask;
  d.streams.resetStreamKey(r.account.id, s.id);
  return r.redirect(`/dashboard/streams/${s.id}`, { notice: 'The stream key was reset. Reveal the new key below.' });
}

/** POST `/dashboard/streams/:id/delete`: deletes the stream (ending it when live), once confirmed. */
function deleteStream(d: StreamPagesDeps, r: DashRequest): WebReply {
  const s = d.streams.get(r.account.id, r.params[0]!, false);
  const ask = unconfirmed(r, 'Delete stream', 'streams', {
    title: `Delete “${s.title}”?`,
    message: s.status === 'live' ? 'The stream is live: the publisher is disconnected and the stream ends, then it is deleted.' : 'The stream and its key are deleted.',
    action: `/dashboard/streams/${s.id}/delete`,
    button: 'Delete stream',
    back: `/dashboard/streams/${s.id}`,
  });
  if (ask) return ask;
  d.streams.delete(r.account.id, s.id);
  return r.redirect('/dashboard/streams', { notice: `Stream “${s.title}” deleted.` });
}
