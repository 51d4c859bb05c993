/**
 * Podcasts pages: podcasts (create, feed URL with a copy button, archive), episodes (create, audio
 * upload with a progress bar, publish now or schedule, cancel a schedule or a publication waiting for
 * its audio, edit the title, show notes, chapters and transcript, see the loudness, delete). The upload is a
 * session + CSRF authenticated `PUT /dashboard/podcasts/:id/episodes/:eid/audio` streamed to disk by
 * src/base/http/upload.ts into EpisodesService.attachAudio, exactly like `PUT /v2/…/audio`; the page
 * sends it with XMLHttpRequest (`assets/upload.js`) to show progress. Everything else goes through
 * PodcastsService and EpisodesService, like the API.
 */
import { ApiError } from '../../base/errors/errors.js';
import { parse } from '../api/validation.js';
import { CreateEpisode, CreatePodcast, EPISODE_TYPES, PublishEpisode, UpdateEpisode, UpdatePodcast } from '../api/podcasts/schemas.js';
import { checkChapters } from '../api/podcasts/chapters.js';
import { checkTranscript, transcriptTypeOf } from '../api/podcasts/transcript.js';
import type { PodcastsService } from '../services/podcasts.js';
import type { EpisodeObject } from '../services/episode-object.js';
import type { EpisodesService } from '../services/episodes.js';
import type { PodcastStatsService } from '../services/podcast-stats.js';
import { downloadsCard } from './downloads.js';
import type { HttpServer, ApiRequest, WebReply } from '../../base/http/server.js';
import { registerUploadRoute } from '../../base/http/upload.js';
import type { MediaStore } from '../episode-audio/store.js';
import type { Logger } from '../../base/logger.js';
import type { AssetUrls } from './assets.js';
import type { Gate, Signed } from './gate.js';
import { unconfirmed } from './confirm.js';
import { badge, copyField, csrfField, esc, postButton, tableWrap, time } from './html.js';
import type { Limits } from '../../base/limits/limits.js';
import type { DashRequest, Router } from './router.js';

export interface PodcastPagesDeps {
  http: HttpServer;
  gate: Gate;
  podcasts: PodcastsService;
  episodes: EpisodesService;
  media: MediaStore;
  maxUploadBytes: number;
  /** Free space uploads must leave on the data volume (bytes; 0 = no check). */
  minFreeDiskBytes: number;
  limits: Limits;
  assets: AssetUrls;
  log: Logger;
  now: () => number;
  /** Download statistics (the podcast page's downloads card); absent: no card. */
  stats?: PodcastStatsService;
}

/** Registers `/dashboard/podcasts…` and the dashboard's audio upload route. */
export function registerPodcastPages(router: Router, d: PodcastPagesDeps): void {
  const back = (p: string[]) => `/dashboard/podcasts/${p[0]}`;
  const epBack = (p: string[]) => `/dashboard/podcasts/${p[0]}/episodes/${p[1]}`;
  router.get('/dashboard/podcasts', (r) => podcastsPage(d, r));
  router.post('/dashboard/podcasts', () => '/dashboard/podcasts', (r) => createPodcast(d, r));
  router.get('/dashboard/podcasts/:id', (r) => podcastPage(d, r));
  router.post('/dashboard/podcasts/:id/archive', back, (r) => archivePodcast(d, r));
  router.post('/dashboard/podcasts/:id/episodes', back, (r) => createEpisode(d, r));
  router.get('/dashboard/podcasts/:id/episodes/:eid', (r) => episodePage(d, r));
  router.post('/dashboard/podcasts/:id/episodes/:eid/publish', epBack, (r) => publishEpisode(d, r));
  router.post('/dashboard/podcasts/:id/episodes/:eid/unschedule', epBack, (r) => unscheduleEpisode(d, r));
  router.post('/dashboard/podcasts/:id/episodes/:eid/delete', epBack, (r) => deleteEpisode(d, r));
  router.post('/dashboard/podcasts/:id/episodes/:eid/edit', epBack, (r) => editEpisode(d, r));
  router.post('/dashboard/podcasts/:id/episodes/:eid/chapters', epBack, (r) => saveChapters(d, r));
  router.post('/dashboard/podcasts/:id/episodes/:eid/transcript', epBack, (r) => saveTranscript(d, r));
  // The upload: same streaming, size cap and service as PUT /v2/…/audio; authenticated by the
  // session cookie and the X-CSRF-Token header (a cross-site page can send neither).
  registerUploadRoute<Signed>(d.http, 'put', '/dashboard/podcasts/:id/episodes/:eid/audio', {
    guard: (req) => uploadGuard(d, req),
    begin: (req, s) => {
      d.episodes.checkUploadTarget(s.account.id, req.params[0]!, req.params[1]!);
      return { tempPath: d.media.tempPath(), maxBytes: d.maxUploadBytes };
    },
    finish: async (req, s, tempPath, size) => ({ status: 200, body: await d.episodes.attachAudio(s.account.id, req.params[0]!, req.params[1]!, tempPath, size) }),
    minFreeDiskBytes: d.minFreeDiskBytes,
    limits: d.limits,
    log: d.log,
  });
}

/** The dashboard upload's guard: the session of the cookie, sent by this dashboard (Origin and `X-CSRF-Token`). @throws ApiError 401 `not_signed_in`, 403 `csrf_failed` */
function uploadGuard(d: PodcastPagesDeps, req: ApiRequest): Signed {
  const signed = d.gate.signedByCookie(req.headers.cookie ?? '');
  if (!signed) throw new ApiError('not_signed_in', 'Sign in to the dashboard again.');
  if (!d.gate.sameOrigin(req.headers.origin) || !d.gate.sessions.checkCsrf(signed.session, req.headers.csrfToken)) {
    throw new ApiError('csrf_failed', 'The upload was not sent by this dashboard (CSRF check failed). Reload the page.');
  }
  return signed;
}

/** GET `/dashboard/podcasts`: the list and the create form. */
function podcastsPage(d: PodcastPagesDeps, r: DashRequest): WebReply {
  const list = d.podcasts.list(r.account.id, undefined, { limit: 100 }).data;
  const rows = list.map(
    (p) => `<tr><td><a href="/dashboard/podcasts/${esc(p.id)}">${esc(p.title)}</a></td><td>${badge(p.status)}</td><td class="num">${p.episodeCount}</td><td>${time(p.createdAt)}</td></tr>`,
  );
  return r.page(
    'Podcasts',
    'podcasts',
    `<h1>Podcasts</h1>
<section class="card" aria-labelledby="create-podcast">
<h2 id="create-podcast">Create a podcast</h2>
<form method="post" action="/dashboard/podcasts" class="grid-form">${csrfField(r.session.csrfToken)}
<div class="field span-2"><label for="pod-title">Title</label><input id="pod-title" name="title" required maxlength="200"></div>
<div class="field span-2"><label for="pod-desc">Description</label><textarea id="pod-desc" name="description" rows="3" maxlength="4000"></textarea></div>
<div class="field"><label for="pod-author">Author</label><input id="pod-author" name="author" maxlength="255"></div>
<div class="field"><label for="pod-email">Owner email</label><input id="pod-email" name="ownerEmail" type="email" maxlength="254"></div>
<div class="field"><label for="pod-lang">Language</label><input id="pod-lang" name="language" value="en" maxlength="20"></div>
<div class="field"><label for="pod-cat">Apple category</label><input id="pod-cat" name="category" placeholder="Technology" maxlength="100"></div>
<div class="field span-2"><label for="pod-image">Cover image URL</label><input id="pod-image" name="imageUrl" type="url" maxlength="2048" placeholder="https://…/cover.jpg"></div>
<div class="field field-end"><button type="submit" class="btn btn-primary">Create podcast</button></div>
</form>
</section>
<section aria-labelledby="podcasts-list"><h2 id="podcasts-list">Your podcasts</h2>
${tableWrap('Podcasts', ['Title', 'Status', 'Episodes', 'Created'], rows, 'No podcasts yet.')}
</section>`,
  );
}

/** POST `/dashboard/podcasts`: creates a podcast, then shows it. */
function createPodcast(d: PodcastPagesDeps, r: DashRequest): WebReply {
  const p = d.podcasts.create(r.account.id, parse(CreatePodcast, formObject(r.form, ['title', 'description', 'author', 'ownerEmail', 'language', 'category', 'imageUrl'])));
  return r.redirect(`/dashboard/podcasts/${p.id}`, { notice: `Podcast “${p.title}” created. Add an episode and publish it to open the feed.` });
}

/** GET `/dashboard/podcasts/:id`: the feed, the downloads card, the new-episode form, the episodes. */
function podcastPage(d: PodcastPagesDeps, r: DashRequest): WebReply {
  const p = d.podcasts.get(r.account.id, r.params[0]!);
  const eps = d.episodes.list(r.account.id, p.id, undefined, { limit: 100 }).data;
  const csrf = r.session.csrfToken;
  const rows = eps.map(
    (e) => `<tr><td><a href="/dashboard/podcasts/${esc(p.id)}/episodes/${esc(e.id)}">${esc(e.title)}</a></td><td>${badge(e.status)}</td>
<td>${e.audio ? `${esc(e.audio.mimeType)}, ${formatBytes(e.audio.sizeBytes)}${e.audio.durationSeconds ? `, ${Math.round(e.audio.durationSeconds)} s` : ''}` : '<span class="muted">no audio</span>'}</td>
<td>${e.status === 'scheduled' ? time(e.publishAt) : time(e.publishedAt)}</td></tr>`,
  );
  return r.page(
    p.title,
    'podcasts',
    `<p class="crumbs"><a href="/dashboard/podcasts">Podcasts</a> /</p>
<h1>${esc(p.title)} ${badge(p.status)}</h1>
<section class="card" aria-labelledby="feed">
<h2 id="feed">Feed</h2>
${copyField('feed-url', 'RSS feed URL', p.feedUrl)}
<p class="muted small">${p.status === 'draft' ? 'The feed answers 404 until the first episode is published.' : `Submit this URL to Apple Podcasts, Spotify and other apps. <a href="${esc(p.feedUrl)}">Open the feed</a>.`}</p>
${p.status !== 'archived' ? `<div class="actions">${postButton(`/dashboard/podcasts/${p.id}/archive`, csrf, 'Archive…', { cls: 'btn btn-small' })}</div>` : ''}
</section>
${d.stats ? downloadsCard(d.stats.stats(r.account.id, p.id, null, {}), new Map(eps.map((e) => [e.id, e.title]))) : ''}
<section class="card" aria-labelledby="new-episode">
<h2 id="new-episode">New episode</h2>
<form method="post" action="/dashboard/podcasts/${esc(p.id)}/episodes" class="grid-form">${csrfField(csrf)}
<div class="field span-2"><label for="ep-title">Title</label><input id="ep-title" name="title" required maxlength="200"></div>
<div class="field span-2"><label for="ep-desc">Description</label><textarea id="ep-desc" name="description" rows="3" maxlength="4000"></textarea></div>
<div class="field"><label for="ep-season">Season</label><input id="ep-season" name="season" type="number" min="1" inputmode="numeric"></div>
<div class="field"><label for="ep-number">Episode number</label><input id="ep-number" name="episodeNumber" type="number" min="1" inputmode="numeric"></div>
<div class="field"><label for="ep-type">Type</label><select id="ep-type" name="episodeType">${EPISODE_TYPES.map((t) => `<option value="${t}">${t}</option>`).join('')}</select></div>
<div class="field field-end"><button type="submit" class="btn btn-primary">Create episode</button></div>
</form>
</section>
<section aria-labelledby="episodes"><h2 id="episodes">Episodes</h2>
${tableWrap('Episodes', ['Title', 'Status', 'Audio', 'Published / scheduled'], rows, 'No episodes yet.')}
</section>`,
  );
}

/** POST `/dashboard/podcasts/:id/archive`: archives the podcast, once confirmed. */
function archivePodcast(d: PodcastPagesDeps, r: DashRequest): WebReply {
  const p = d.podcasts.get(r.account.id, r.params[0]!);
  const ask = unconfirmed(r, 'Archive podcast', 'podcasts', {
    title: `Archive “${p.title}”?`,
    message: 'The feed keeps serving with itunes:complete; no episode can be published any more.',
    action: `/dashboard/podcasts/${p.id}/archive`,
    button: 'Archive',
    back: `/dashboard/podcasts/${p.id}`,
  });
  if (ask) return ask;
  d.podcasts.update(r.account.id, p.id, parse(UpdatePodcast, { status: 'archived' }));
  return r.redirect(`/dashboard/podcasts/${p.id}`, { notice: 'Podcast archived.' });
}

/** POST `/dashboard/podcasts/:id/episodes`: creates a draft episode, then shows it. */
function createEpisode(d: PodcastPagesDeps, r: DashRequest): WebReply {
  const input: Record<string, unknown> = formObject(r.form, ['title', 'description', 'episodeType']);
  for (const k of ['season', 'episodeNumber'] as const) {
    const v = r.form.get(k);
    if (v) input[k] = /^\d+$/.test(v) ? Number(v) : v;
  }
  const e = d.episodes.create(r.account.id, r.params[0]!, parse(CreateEpisode, input));
  return r.redirect(`/dashboard/podcasts/${e.podcastId}/episodes/${e.id}`, { notice: `Episode “${e.title}” created. Upload its audio, then publish it.` });
}

/** GET `/dashboard/podcasts/:id/episodes/:eid`: the audio (with the upload form), publishing, the details. */
function episodePage(d: PodcastPagesDeps, r: DashRequest): WebReply {
  const p = d.podcasts.get(r.account.id, r.params[0]!);
  const e = d.episodes.get(r.account.id, p.id, r.params[1]!);
  const csrf = r.session.csrfToken;
  const base = `/dashboard/podcasts/${p.id}/episodes/${e.id}`;
  return r.page(
    e.title,
    'podcasts',
    `<p class="crumbs"><a href="/dashboard/podcasts">Podcasts</a> / <a href="/dashboard/podcasts/${esc(p.id)}">${esc(p.title)}</a> /</p>
<h1>${esc(e.title)} <span id="episode-status">${badge(e.status)}</span></h1>
<section class="card" aria-labelledby="audio">
<h2 id="audio">Audio</h2>
${audioSummary(e)}
<form id="upload-form" class="stack" data-upload-url="${esc(base)}/audio" data-csrf="${esc(csrf)}" data-max-bytes="${d.maxUploadBytes}">
<div class="field"><label for="audio-file">${e.audio ? 'Replace the audio file' : 'Audio file'} (MP3, AAC/M4A, Opus, up to ${formatBytes(d.maxUploadBytes)})</label>
<input id="audio-file" name="audio" type="file" accept="audio/*,.mp3,.m4a,.aac,.opus,.ogg" required></div>
<div><button type="submit" class="btn btn-primary" id="upload-button">Upload</button></div>
<div class="progress-row"><progress id="upload-progress" max="100" value="0" aria-label="Upload progress" hidden></progress><span id="upload-state" class="small" role="status" aria-live="polite"></span></div>
<noscript><p class="muted">Uploading needs JavaScript here; without it use <code>PUT /v2/podcasts/${esc(p.id)}/episodes/${esc(e.id)}/audio</code>.</p></noscript>
</form>
</section>
<section class="card" aria-labelledby="loudness">
<h2 id="loudness">Loudness</h2>
${loudnessHtml(e)}
</section>
<section class="card" aria-labelledby="publish">
<h2 id="publish">Publish</h2>
${publishHtml(e, base, csrf, p.status)}
</section>
${editHtml(e, d.episodes.documents(r.account.id, p.id, e.id), base, csrf)}
<section class="card" aria-labelledby="details">
<h2 id="details">Details</h2>
<dl class="details">
<dt>ID</dt><dd class="mono">${esc(e.id)}</dd>
<dt>Type</dt><dd>${esc(e.episodeType)}</dd>
<dt>Season / number</dt><dd>${e.season ?? '—'} / ${e.episodeNumber ?? '—'}</dd>
<dt>GUID</dt><dd class="mono break">${e.guid ? esc(e.guid) : '—'}</dd>
<dt>Created</dt><dd>${time(e.createdAt)}</dd>
</dl>
${e.description ? `<p>${esc(e.description)}</p>` : ''}
<div class="actions">${postButton(`${base}/delete`, csrf, 'Delete episode…', { cls: 'btn btn-small btn-danger' })}</div>
</section>`,
    { scripts: [d.assets.upload] },
  );
}

/** POST `/dashboard/podcasts/:id/episodes/:eid/publish`: publishes now, or schedules (`when=schedule`, `publish_at` in the browser's time zone). */
async function publishEpisode(d: PodcastPagesDeps, r: DashRequest): Promise<WebReply> {
  const [podcastId, episodeId] = r.params as [string, string];
  let publishAt: string | undefined;
  if (r.form.get('when') === 'schedule') {
    publishAt = localToIso(r.form.get('publish_at') ?? '', r.form.get('tz_offset'));
    if (!publishAt) throw new ApiError('parameter_invalid', 'Choose the date and time to publish at.', { param: 'publishAt' });
  }
  const e = await d.episodes.publishWhenFinal(r.account.id, podcastId, parse(PublishEpisode, { episodeId, ...(publishAt ? { publishAt } : {}) }));
  return r.redirect(`/dashboard/podcasts/${podcastId}/episodes/${episodeId}`, {
    notice:
      e.status === 'published'
        ? 'Episode published: it is in the feed now.'
        : e.status === 'processing'
          ? 'The audio is still being processed: the episode is published as soon as it is ready.'
          : `Episode scheduled for ${e.publishAt}.`,
  });
}

/** POST `/dashboard/podcasts/:id/episodes/:eid/edit`: the title and the description (show notes; HTML allowed). */
function editEpisode(d: PodcastPagesDeps, r: DashRequest): WebReply {
  const [podcastId, episodeId] = r.params as [string, string];
  const input: Record<string, unknown> = { description: r.form.get('description') ?? '' };
  const title = r.form.get('title');
  if (title !== null) input.title = title;
  d.episodes.update(r.account.id, podcastId, episodeId, parse(UpdateEpisode, input));
  return r.redirect(`/dashboard/podcasts/${podcastId}/episodes/${episodeId}`, { notice: 'Episode saved.' });
}

/** POST `/dashboard/podcasts/:id/episodes/:eid/chapters`: a JSON chapters document, checked as the API checks it; empty removes the chapters. */
function saveChapters(d: PodcastPagesDeps, r: DashRequest): WebReply {
  const [podcastId, episodeId] = r.params as [string, string];
  const text = r.form.get('chapters') ?? '';
  const back = `/dashboard/podcasts/${podcastId}/episodes/${episodeId}`;
  if (text.trim() === '') {
    d.episodes.deleteChapters(r.account.id, podcastId, episodeId);
    return r.redirect(back, { notice: 'Chapters removed.' });
  }
  d.episodes.setChapters(r.account.id, podcastId, episodeId, checkChapters(Buffer.from(text, 'utf8')));
  return r.redirect(back, { notice: 'Chapters saved.' });
}

/** POST `/dashboard/podcasts/:id/episodes/:eid/transcript`: a transcript of the chosen type, checked as the API checks it; empty removes it. */
function saveTranscript(d: PodcastPagesDeps, r: DashRequest): WebReply {
  const [podcastId, episodeId] = r.params as [string, string];
  const text = r.form.get('transcript') ?? '';
  const back = `/dashboard/podcasts/${podcastId}/episodes/${episodeId}`;
  if (text.trim() === '') {
    d.episodes.deleteTranscript(r.account.id, podcastId, episodeId);
    return r.redirect(back, { notice: 'Transcript removed.' });
  }
  const type = transcriptTypeOf(r.form.get('type') ?? '');
  if (!type) throw new ApiError('parameter_invalid', 'Choose the transcript format.', { param: 'type' });
  d.episodes.setTranscript(r.account.id, podcastId, episodeId, type, checkTranscript(type, Buffer.from(text, 'utf8')));
  return r.redirect(back, { notice: 'Transcript saved.' });
}

/** POST `/dashboard/podcasts/:id/episodes/:eid/unschedule`: the scheduled episode becomes a draft again. */
function unscheduleEpisode(d: PodcastPagesDeps, r: DashRequest): WebReply {
  const [podcastId, episodeId] = r.params as [string, string];
  d.episodes.update(r.account.id, podcastId, episodeId, parse(UpdateEpisode, { status: 'draft' }));
  return r.redirect(`/dashboard/podcasts/${podcastId}/episodes/${episodeId}`, { notice: 'Schedule cancelled: the episode is a draft again.' });
}

/** POST `/dashboard/podcasts/:id/episodes/:eid/delete`: deletes the episode and its audio, once confirmed. */
function deleteEpisode(d: PodcastPagesDeps, r: DashRequest): WebReply {
  const [podcastId, episodeId] = r.params as [string, string];
  const e = d.episodes.get(r.account.id, podcastId, episodeId);
  const ask = unconfirmed(r, 'Delete episode', 'podcasts', {
    title: `Delete “${e.title}”?`,
    message: e.status === 'published' ? 'The episode leaves the feed and its audio is deleted (podcast.deleted is sent).' : 'The episode and its audio are deleted.',
    action: `/dashboard/podcasts/${podcastId}/episodes/${episodeId}/delete`,
    button: 'Delete episode',
    back: `/dashboard/podcasts/${podcastId}/episodes/${episodeId}`,
  });
  if (ask) return ask;
  d.episodes.delete(r.account.id, podcastId, episodeId);
  return r.redirect(`/dashboard/podcasts/${podcastId}`, { notice: `Episode “${e.title}” deleted.` });
}

/** The named non-empty form fields as an object (empty fields are left out, as if not sent). */
function formObject(form: URLSearchParams, names: string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const n of names) {
    const v = form.get(n);
    if (v !== null && v.trim() !== '') out[n] = v;
  }
  return out;
}

function audioSummary(e: EpisodeObject): string {
  if (!e.audio) return '<p class="muted">No audio yet.</p>';
  return `<p>${esc(e.audio.mimeType)}, ${formatBytes(e.audio.sizeBytes)}${e.audio.durationSeconds ? `, ${Math.round(e.audio.durationSeconds)} s` : ''}${
    e.audioUrl && e.status === 'published' ? ` · <a href="${esc(e.audioUrl)}">Audio file</a>` : ''
  }</p>`;
}

/** The loudness card: what `audioUrl` serves, measured (BS.1770-4), and whether it is the normalised copy. */
function loudnessHtml(e: EpisodeObject): string {
  if (!e.audio) return '<p class="muted">No audio yet.</p>';
  const l = e.loudness;
  if (!l) return '<p class="muted" id="loudness-state">Measuring…</p>';
  const fig = (n: number | null, unit: string) => (n === null ? '—' : `${n.toFixed(1)} ${unit}`);
  return `<dl class="details" id="loudness-figures">
<dt>Integrated</dt><dd>${fig(l.integratedLufs, 'LUFS')}</dd>
<dt>True peak</dt><dd>${fig(l.truePeakDbtp, 'dBTP')}</dd>
<dt>Loudness range</dt><dd>${fig(l.lraLu, 'LU')}</dd>
<dt>Served</dt><dd>${l.normalized ? `normalised to ${l.target} LUFS (${esc(l.method ?? 'linear')}) from ${fig(l.original?.integratedLufs ?? null, 'LUFS')}` : 'as uploaded'}</dd>
</dl>`;
}

/** The edit card: title and description, chapters (JSON), transcript (WebVTT, SubRip or JSON); forms up to 64 KiB, larger through the API. */
function editHtml(e: EpisodeObject, docs: { chapters: string | null; transcript: string | null; transcriptType: string | null }, base: string, csrf: string): string {
  const opt = (v: string, label: string) => `<option value="${v}"${(docs.transcriptType ?? 'text/vtt') === v ? ' selected' : ''}>${label}</option>`;
  return `<section class="card" aria-labelledby="edit">
<h2 id="edit">Title and show notes</h2>
<form method="post" action="${esc(base)}/edit" class="stack" id="edit-form">${csrfField(csrf)}
<div class="field"><label for="ep-title">Title</label><input id="ep-title" name="title" value="${esc(e.title)}" maxlength="200" required></div>
<div class="field"><label for="ep-description">Description <span class="muted">(HTML allowed: p, a, b, i, lists; the feed keeps those tags)</span></label><textarea id="ep-description" name="description" rows="6" maxlength="4000">${esc(e.description)}</textarea></div>
<div><button type="submit" class="btn btn-primary">Save</button></div>
</form>
</section>
<section class="card" aria-labelledby="chapters">
<h2 id="chapters">Chapters</h2>
<form method="post" action="${esc(base)}/chapters" class="stack" id="chapters-form">${csrfField(csrf)}
<div class="field"><label for="ep-chapters">Podcasting 2.0 JSON chapters <span class="muted">(empty removes them)</span></label><textarea id="ep-chapters" name="chapters" rows="8" class="mono" placeholder='{"version":"1.2.0","chapters":[{"startTime":0,"title":"Intro"}]}'>${esc(docs.chapters ?? '')}</textarea></div>
<div><button type="submit" class="btn btn-primary">Save chapters</button></div>
</form>
</section>
<section class="card" aria-labelledby="transcript">
<h2 id="transcript">Transcript</h2>
<form method="post" action="${esc(base)}/transcript" class="stack" id="transcript-form">${csrfField(csrf)}
<div class="field"><label for="ep-transcript-type">Format</label><select id="ep-transcript-type" name="type">${opt('text/vtt', 'WebVTT')}${opt('application/x-subrip', 'SubRip (SRT)')}${opt('application/json', 'Podcasting 2.0 JSON')}</select></div>
<div class="field"><label for="ep-transcript">Transcript <span class="muted">(empty removes it)</span></label><textarea id="ep-transcript" name="transcript" rows="8" class="mono">${esc(docs.transcript ?? '')}</textarea></div>
<div><button type="submit" class="btn btn-primary">Save transcript</button></div>
</form>
</section>`;
}

function publishHtml(e: EpisodeObject, base: string, csrf: string, podcastStatus: string): string {
  if (e.status === 'published') return `<p>Published ${time(e.publishedAt)}: it is in the feed.</p>`;
  if (e.status === 'processing') {
    return `<p>Publishing as soon as the audio is ready (it is being finished or loudness-normalised); the feed lists it then.</p><div class="actions">${postButton(`${base}/unschedule`, csrf, 'Cancel publication', { cls: 'btn btn-small' })}</div>`;
  }
  if (podcastStatus === 'archived') return '<p class="muted">The podcast is archived: no new publication.</p>';
  const scheduled =
    e.status === 'scheduled'
      ? `<p>Scheduled for ${time(e.publishAt)}.</p><div class="actions">${postButton(`${base}/unschedule`, csrf, 'Cancel schedule', { cls: 'btn btn-small' })}</div>`
      : '';
  return `${scheduled}${e.audio ? '' : '<p class="muted">Upload the audio first: an episode without audio cannot be published.</p>'}
<form method="post" action="${esc(base)}/publish" class="stack" id="publish-form">${csrfField(csrf)}
<input type="hidden" name="tz_offset" value="" id="tz-offset">
<fieldset class="checks"><legend>When</legend>
<label for="when-now"><input type="radio" id="when-now" name="when" value="now" checked> Now</label>
<label for="when-later"><input type="radio" id="when-later" name="when" value="schedule"> At</label>
</fieldset>
<div class="field"><label for="publish-at">Date and time <span class="muted" id="tz-hint">(UTC)</span></label><input id="publish-at" name="publish_at" type="datetime-local"></div>
<div><button type="submit" class="btn btn-primary"${e.audio ? '' : ' disabled'}>${e.status === 'scheduled' ? 'Publish / reschedule' : 'Publish'}</button></div>
</form>`;
}

/**
 * A `datetime-local` value (`2026-05-01T09:00`) plus the browser's `Date.getTimezoneOffset()`
 * (minutes, UTC − local; absent without JavaScript = UTC) → ISO 8601 UTC, or undefined.
 */
export function localToIso(local: string, tzOffset: string | null): string | undefined {
  const m = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2}))?$/.exec(local);
  if (!m) return undefined;
  const utc = Date.UTC(+m[1]!, +m[2]! - 1, +m[3]!, +m[4]!, +m[5]!, +(m[6] ?? 0));
  const off = tzOffset && /^-?\d{1,4}$/.test(tzOffset) ? Number(tzOffset) : 0;
  const ms = utc + off * 60_000;
  return Number.isFinite(ms) ? new Date(ms).toISOString().replace(/\.000Z$/, 'Z') : undefined;
}

/** Bytes → `12.3 MB`. */
export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  if (n < 1024 ** 3) return `${(n / 1024 / 1024).toFixed(1)} MB`;
  return `${(n / 1024 ** 3).toFixed(2)} GB`;
}
