/**
 * The stream page's cards (docs/dashboard.md "Pages"): OBS ingest, go live from the browser
 * (docs/behaviour.md §18), Icecast source, listeners, loudness (docs/streams.md "Live loudness"),
 * now playing and the play log, broadcasts and recording, fallback (docs/streams.md "Fallback"),
 * the player with catch-up (docs/behaviour.md §17), errors and details; and what the page polls
 * (`StreamLive`), whose fragments `assets/stream.js` redraws the same way. The routes are in
 * streams.ts.
 */
import { NOW_PLAYING_MAX } from '../api/streams/schemas.js';
import type { TrackObject } from '../services/play-log.js';
import type { BroadcastObject, LiveLoudness } from '../services/broadcasts.js';
import type { StreamObject } from '../services/stream-object.js';
import type { StreamStats } from '../../base/listeners.js';
import { badge, copyField, csrfField, esc, postButton, tableWrap, time } from './html.js';

/** What the stream page polls. */
export interface StreamLive {
  status: StreamObject['status'];
  /** Where the audio comes from now (docs/streams.md "Fallback"). */
  source: StreamObject['source'];
  startedAt: string | null;
  endedAt: string | null;
  listenerCount: number;
  peakListenerCount: number;
  totalListeners: number;
  averageListenDurationSeconds: number;
  countries: StreamStats['countries'];
  /** What plays now (docs/behaviour.md §11), or null. */
  nowPlaying: StreamObject['nowPlaying'];
  /** The newest tracks of the play log. */
  tracks: TrackObject[];
  errors: StreamErrorItem[];
  /** The publisher's loudness now (docs/streams.md "Live loudness"), or null when not measured. */
  loudness: LiveLoudness | null;
  /** Server time of this sample (ISO). */
  at: string;
}

/** One `stream.error` event as the page lists it. */
export interface StreamErrorItem {
  id: string;
  created: string;
  code: string;
  message: string;
}

/**
 * The stream page's body: its cards in page order inside `#stream-page`, whose data attributes tell
 * `assets/stream.js` what to poll (`live.json`), what to play (`hlsJs`: the hls.js asset URL) and,
 * for a token stream, where to get a listener token.
 */
export function streamPageBody(s: StreamObject, l: StreamLive, broadcasts: BroadcastObject[], csrf: string, hlsJs: string): string {
  const tokenAttrs = s.playback !== 'public' ? ` data-token-url="/dashboard/streams/${esc(s.id)}/listener_token" data-csrf="${esc(csrf)}"` : '';
  return `<p class="crumbs"><a href="/dashboard/streams">Streams</a> /</p>
<h1>${esc(s.title)} <span id="stream-status" aria-live="polite">${badge(s.status)}</span></h1>
<div id="stream-page" class="stream-grid" data-live-url="/dashboard/streams/${esc(s.id)}/live.json" data-hls-url="${esc(playerUrl(s))}" data-hls-js="${esc(hlsJs)}"${tokenAttrs}>
${ingestCard(s, csrf)}

${goLiveCard(s, csrf)}

${icecastCard(s)}

${listenersCard(l)}

${loudnessCard(l.loudness)}

${nowPlayingCard(s, l, csrf)}

${broadcastsCard(s, broadcasts, csrf)}

${fallbackCard(s, csrf)}

${playerCard(s)}

<section class="card" aria-labelledby="errors-title">
<h2 id="errors-title">Recent errors</h2>
<div id="stream-errors">${errorsHtml(l.errors)}</div>
</section>

${detailsCard(s, csrf)}
</div>`;
}

/** The stream page's OBS ingest card: server, stream key (hidden until revealed), playback URLs. */
function ingestCard(s: StreamObject, csrf: string): string {
  return `<section class="card" aria-labelledby="ingest">
<h2 id="ingest">Ingest settings (OBS)</h2>
<p class="muted small">OBS → Settings → Stream → Service <em>Custom…</em>. Audio codec ${esc(s.codec.toUpperCase())}; video is ignored.</p>
${copyField('ingest-server', 'Server', s.rtmpUrl)}
${copyField('ingest-key', 'Stream key', s.streamKey ?? '', { secret: true })}
${copyField('hls-url', 'HLS playback URL', s.hlsUrl)}
${copyField('listen-url', 'Listen URL (Icecast-style: VLC, smart speakers, podcast apps)', s.listenUrl)}
<div class="actions">${postButton(`/dashboard/streams/${s.id}/reset_key`, csrf, 'Reset stream key…', { cls: 'btn btn-small' })}</div>
</section>`;
}

/**
 * The stream page's "Go live from this browser" card (docs/behaviour.md §18), driven by
 * `assets/golive.js`: a microphone choice, an input level meter, mute, the elapsed time, stop and
 * the stream's state as listeners see it; it publishes over WHIP with a publish token.
 */
function goLiveCard(s: StreamObject, csrf: string): string {
  return `<section class="card" aria-labelledby="golive-title" id="golive" data-token-url="/dashboard/streams/${esc(s.id)}/publish_token" data-csrf="${esc(csrf)}">
<h2 id="golive-title">Go live from this browser</h2>
<p class="muted small">Publishes your microphone over WebRTC (WHIP) with a short-lived publish token; the stream key never reaches this page's script. OBS 30+: Service <em>WHIP</em>, Server = the WHIP URL, Bearer token = the stream key.</p>
${copyField('whip-url', 'WHIP URL', s.whipUrl)}
<label for="golive-mic">Microphone</label>
<select id="golive-mic"><option value="">Default microphone</option></select>
<div class="golive-meter"><label for="golive-level">Input level</label> <meter id="golive-level" min="-60" max="0" low="-18" high="-6" optimum="-12" value="-60">−60 dBFS</meter></div>
<div class="actions">
<button type="button" class="btn btn-primary" id="golive-start">Go live</button>
<button type="button" class="btn" id="golive-mute" disabled aria-pressed="false">Mute microphone</button>
<button type="button" class="btn" id="golive-stop" disabled>Stop publishing</button>
</div>
<p class="small"><span id="golive-elapsed" aria-live="off">0:00</span> · <span id="golive-state" aria-live="polite">Not publishing</span> · Listeners see: <span id="golive-listeners-see">${esc(s.status)}</span></p>
</section>`;
}

/** The stream page's Icecast source card: server, port, mount, user, password (the stream key, hidden until revealed). */
function icecastCard(s: StreamObject): string {
  const ice = new URL(s.icecastUrl);
  const icecast = { host: ice.hostname.replace(/^\[|\]$/g, ''), port: ice.port || '80', mount: ice.pathname };
  return `<section class="card" aria-labelledby="icecast-source">
<h2 id="icecast-source">Icecast source settings (BUTT, Mixxx, Liquidsoap, ezstream)</h2>
<p class="muted small">Server type <em>Icecast</em>; send ${esc(s.codec === 'mp3' ? 'MP3' : s.codec === 'aac' ? 'AAC (ADTS)' : 'Ogg Opus')}. The password is the stream key.</p>
${copyField('icecast-server', 'Icecast server', icecast.host)}
${copyField('icecast-port', 'Icecast port', icecast.port)}
${copyField('icecast-mount', 'Mount', icecast.mount)}
${copyField('icecast-user', 'User', 'source')}
${copyField('icecast-password', 'Source password', s.streamKey ?? '', { secret: true })}
</section>`;
}

/** The stream page's listeners card: the counts, the chart (drawn by the page script) and the countries. */
function listenersCard(l: StreamLive): string {
  return `<section class="card" aria-labelledby="listeners">
<h2 id="listeners">Listeners</h2>
<div class="stats">
<div class="stat"><span class="stat-value" id="listener-count" aria-live="polite">${l.listenerCount}</span><span class="stat-label">listening now</span></div>
<div class="stat"><span class="stat-value" id="peak-count">${l.peakListenerCount}</span><span class="stat-label">peak</span></div>
<div class="stat"><span class="stat-value" id="total-count">${l.totalListeners}</span><span class="stat-label">sessions in total</span></div>
<div class="stat"><span class="stat-value" id="avg-duration">${formatDuration(l.averageListenDurationSeconds)}</span><span class="stat-label">average listen</span></div>
</div>
<figure class="chart">
<svg id="listeners-chart" viewBox="0 0 600 180" role="img" aria-labelledby="chart-caption" preserveAspectRatio="none"></svg>
<figcaption id="chart-caption" class="muted small">Listeners over time while this page is open (sampled every 2 s).</figcaption>
</figure>
<h3>Countries</h3>
<div id="countries">${countriesHtml(l.countries)}</div>
</section>`;
}

/** The loudness meter's range (LUFS) and its marks: EBU R128's −23 and the usual streaming target −16. */
const METER_MIN = -60;
const METER_MAX = 0;
const METER_MARKS = [-23, -16];

/** x (0…600) of `lufs` on the meter. */
function meterX(lufs: number): number {
  return Math.round(((Math.min(METER_MAX, Math.max(METER_MIN, lufs)) - METER_MIN) / (METER_MAX - METER_MIN)) * 6000) / 10;
}

/** A loudness figure as text: `−21.0 LUFS`, or a dash. */
export function lufsText(lufs: number | null): string {
  return lufs === null ? '—' : `${lufs.toFixed(1).replace('-', '−')} LUFS`;
}

/**
 * The stream page's loudness card (docs/streams.md "Live loudness"): a meter of the short-term
 * loudness from −60 to 0 LUFS (`role="meter"`; SVG, drawn again by the page script) with marks at
 * −23 and −16 LUFS, and the short-term, momentary and broadcast's integrated values in text.
 */
function loudnessCard(l: LiveLoudness | null): string {
  const now = l ? Math.min(METER_MAX, Math.max(METER_MIN, l.shortTermLufs)) : METER_MIN;
  const marks = METER_MARKS.map((m) => `<line class="lufs-mark" x1="${meterX(m)}" x2="${meterX(m)}" y1="0" y2="28"/>`).join('');
  return `<section class="card" aria-labelledby="loudness-title">
<h2 id="loudness-title">Loudness</h2>
<div id="loudness-meter" class="lufs-meter" role="meter" aria-label="Short-term loudness" aria-valuemin="${METER_MIN}" aria-valuemax="${METER_MAX}" aria-valuenow="${now}" aria-valuetext="${l ? esc(lufsText(l.shortTermLufs)) : 'not measured'}">
<svg viewBox="0 0 600 28" preserveAspectRatio="none" aria-hidden="true" focusable="false"><rect class="lufs-track" x="0" y="0" width="600" height="28"/><rect id="loudness-fill" class="lufs-fill" x="0" y="0" width="${l ? meterX(l.shortTermLufs) : 0}" height="28"/>${marks}</svg>
<div class="lufs-scale" aria-hidden="true"><span class="lufs-at-min">−60</span><span class="lufs-at-r128">−23 R128</span><span class="lufs-at-target">−16<span class="lufs-wide"> streaming</span></span><span class="lufs-at-max">0</span></div>
</div>
<div class="stats">
<div class="stat"><span class="stat-value" id="loudness-short">${lufsText(l?.shortTermLufs ?? null)}</span><span class="stat-label">short-term (3 s)</span></div>
<div class="stat"><span class="stat-value" id="loudness-momentary">${lufsText(l?.momentaryLufs ?? null)}</span><span class="stat-label">momentary (400 ms)</span></div>
<div class="stat"><span class="stat-value" id="loudness-integrated">${lufsText(l?.integratedLufs ?? null)}</span><span class="stat-label">this broadcast (integrated)</span></div>
</div>
<p class="muted small" id="loudness-note">${l ? LOUDNESS_NOTE : LOUDNESS_NONE}</p>
</section>`;
}

/** The loudness card's note while measured, and while not. */
const LOUDNESS_NOTE = 'ITU-R BS.1770-4, measured on the publisher’s audio. EBU R128 aims at −23 LUFS; streaming services at about −16.';
const LOUDNESS_NONE = 'Not measured now: nobody publishes, or the stream has no encoding process (quality low without silence detection, or the ABR ladder off).';

/** The stream page's now-playing card: what plays, the form that sets it, the play log. */
function nowPlayingCard(s: StreamObject, l: StreamLive, csrf: string): string {
  return `<section class="card" aria-labelledby="now-playing-title">
<h2 id="now-playing-title">Now playing</h2>
<p id="now-playing" class="now-playing" aria-live="polite">${nowPlayingHtml(l.nowPlaying)}</p>
<form method="post" action="/dashboard/streams/${esc(s.id)}/now_playing" class="grid-form">${csrfField(csrf)}
<div class="field span-2"><label for="np-title">Track title</label><input id="np-title" name="title" required maxlength="${NOW_PLAYING_MAX}"></div>
<div class="field"><label for="np-artist">Artist</label><input id="np-artist" name="artist" maxlength="${NOW_PLAYING_MAX}"></div>
<div class="field field-end"><button type="submit" class="btn btn-primary">Set track</button></div>
</form>
<p class="muted small">While the stream is live. DJ software sets it too: the Icecast metadata update, or <code>title</code>/<code>artist</code> in RTMP metadata.</p>
<h3>Play log</h3>
<div id="play-log">${tracksHtml(l.tracks)}</div>
</section>`;
}

/** The stream page's broadcasts card: the broadcasts and the recording form. */
function broadcastsCard(s: StreamObject, broadcasts: BroadcastObject[], csrf: string): string {
  return `<section class="card card-wide" aria-labelledby="broadcasts-title">
<h2 id="broadcasts-title">Broadcasts</h2>
<p class="muted small">Each time the stream goes live with its key is a broadcast; the URLs and the key stay the same.</p>
<div id="broadcasts">${broadcastsHtml(broadcasts, s.recording?.podcastId ?? null)}</div>
<h3>Recording</h3>
<form method="post" action="/dashboard/streams/${esc(s.id)}/recording" class="grid-form">${csrfField(csrf)}
<div class="field span-2"><label for="recording-podcast">Record every broadcast into podcast (id, <code>pod_…</code>; empty: no recording)</label><input id="recording-podcast" name="podcastId" class="mono" maxlength="64" pattern="pod_[A-Za-z0-9]+" value="${esc(s.recording?.podcastId ?? '')}"></div>
<div class="field"><label for="recording-zone">Time zone (IANA, for the episode titles)</label><input id="recording-zone" name="timeZone" maxlength="64" value="${esc(s.timeZone)}"></div>
<label for="recording-auto"><input type="checkbox" id="recording-auto" name="publish" value="auto"${s.recording?.publish === 'auto' ? ' checked' : ''}> Listen again: publish each broadcast when it ends</label>
<div class="field field-end"><button type="submit" class="btn btn-primary">Save recording</button></div>
</form>
<p class="muted small">Each recorded broadcast becomes its own episode of the podcast, with chapters from its play log: a draft, or with listen again published when the broadcast ends, once its loudness is normalised, titled “${esc(s.title)} — <i>date</i>”. A change applies from the next broadcast.</p>
</section>`;
}

/**
 * What the player plays: the live stream, or — with catch-up on (docs/behaviour.md §17) — the
 * rewind playlist, the live stream with its whole window to scrub back through.
 */
const playerUrl = (s: StreamObject): string => (s.catchUp.hours > 0 ? s.hlsUrl.replace(/index\.m3u8$/, 'rewind.m3u8') : s.hlsUrl);

/** The stream page's player card (hls.js, started by the page script). */
function playerCard(s: StreamObject): string {
  const rewind = s.catchUp.hours > 0 ? ` With catch-up on, drag the position back through the last ${s.catchUp.hours} h; a broadcast's <em>Play</em> plays it from its start.` : '';
  return `<section class="card" aria-labelledby="player-title">
<h2 id="player-title">Player</h2>
<audio id="player" controls preload="none" aria-labelledby="player-title"></audio>
<div class="actions"><button type="button" class="btn btn-primary" id="play">Play</button><span id="player-state" class="muted small" aria-live="polite"></span></div>
<p class="muted small">Plays the HLS stream with hls.js (served by Skylark); the player counts as one listener while it plays.${rewind}</p>
</section>`;
}

/**
 * The stream page's fallback card (docs/streams.md "Fallback"): what plays while no publisher is on
 * air or the live audio is silent, and where the audio comes from now.
 */
function fallbackCard(s: StreamObject, csrf: string): string {
  const f = s.fallback;
  const source = sourceText(s.source);
  const order = (o: 'sequential' | 'shuffle', label: string) => `<option value="${o}"${(f?.order ?? 'sequential') === o ? ' selected' : ''}>${label}</option>`;
  return `<section class="card" aria-labelledby="fallback-title">
<h2 id="fallback-title">Fallback</h2>
<p>On air now: <strong id="stream-source">${esc(source)}</strong></p>
<p class="muted small">Episodes that play in a loop while no publisher is connected, or while the live audio has been silent for the given time; the stream is on air with them from the moment they are set.</p>
<form method="post" action="/dashboard/streams/${esc(s.id)}/fallback" class="grid-form">${csrfField(csrf)}
<div class="field span-2"><label for="fallback-episodes">Episodes (ids <code>ep_…</code>, separated by spaces or commas; empty: no fallback)</label><input id="fallback-episodes" name="episodeIds" class="mono" maxlength="4000" value="${esc(f?.episodeIds.join(' ') ?? '')}"></div>
<div class="field"><label for="fallback-order">Order</label><select id="fallback-order" name="order">${order('sequential', 'In order')}${order('shuffle', 'Shuffled')}</select></div>
<div class="field"><label for="fallback-silence">Switch on silence after (s, 5–300; empty: never)</label><input id="fallback-silence" name="silenceSeconds" type="number" min="5" max="300" value="${f?.silenceSeconds ?? ''}"></div>
<div class="field field-end"><button type="submit" class="btn btn-primary">Save fallback</button></div>
</form>
</section>`;
}

/** What the fallback card says is on air (assets/stream.js says the same). */
function sourceText(source: StreamObject['source']): string {
  return source === 'live' ? 'live audio' : source === 'fallback' ? 'the fallback episodes' : 'nothing (off air)';
}

/** The stream page's details card and its delete button. */
function detailsCard(s: StreamObject, csrf: string): string {
  return `<section class="card" aria-labelledby="details">
<h2 id="details">Details</h2>
<dl class="details">
<dt>ID</dt><dd class="mono">${esc(s.id)}</dd>
<dt>Audio</dt><dd>${esc(s.codec.toUpperCase())}, ${esc(s.quality)}</dd>
<dt>Region</dt><dd>${esc(s.region)}</dd>
<dt>Playback</dt><dd>${typeof s.playback === 'string' ? esc(s.playback) : 'token (publishable-key tokens allowed)'}</dd>
<dt>Latency</dt><dd>${s.latencyMode === 'low' ? 'low (LL-HLS)' : 'standard (classic HLS)'}</dd>
<dt>Reconnect window</dt><dd>${s.reconnectWindow} s</dd>
<dt>Created</dt><dd>${time(s.createdAt)}</dd>
<dt>Started</dt><dd id="started-at">${time(s.startedAt)}</dd>
<dt>Last broadcast ended</dt><dd id="ended-at">${time(s.endedAt)}</dd>
</dl>
<div class="actions">${postButton(`/dashboard/streams/${s.id}/delete`, csrf, 'Delete stream…', { cls: 'btn btn-small btn-danger' })}</div>
</section>`;
}

/** Seconds → `3 min 12 s` (rounded to the whole second first, so 119.6 s is `2 min 0 s`; an hour or more: `1 h 2 min`). */
export function formatDuration(s: number): string {
  if (!Number.isFinite(s) || s <= 0) return '0 s';
  const whole = Math.round(s);
  const h = Math.floor(whole / 3600);
  const m = Math.floor((whole % 3600) / 60);
  const r = whole % 60;
  if (h > 0) return `${h} h ${m} min`;
  return m > 0 ? `${m} min ${r} s` : `${r} s`;
}

/** The countries breakdown: one row per country with a `<meter>` bar (no inline styles: CSP). */
export function countriesHtml(countries: StreamStats['countries']): string {
  if (countries.length === 0) return '<p class="muted">Nobody is listening right now.</p>';
  const max = Math.max(...countries.map((c) => c.listeners));
  return `<ul class="bars">${countries
    .map((c) => {
      const name = c.country ?? 'Unknown';
      return `<li><span class="bar-label">${esc(name)}</span><meter min="0" max="${max}" value="${c.listeners}" aria-label="${esc(name)}">${c.listeners}</meter><span class="bar-value">${c.listeners}</span></li>`;
    })
    .join('')}</ul>`;
}

/** What plays now, as the page shows it. */
export function nowPlayingHtml(np: StreamObject['nowPlaying']): string {
  if (!np) return '<span class="muted">Nothing set.</span>';
  return `<strong>${esc(np.title)}</strong>${np.artist ? ` — ${esc(np.artist)}` : ''}${np.album ? ` <span class="muted">(${esc(np.album)})</span>` : ''} <span class="muted small">since ${time(np.startedAt)}</span>`;
}

/** The play log's newest tracks as a table. */
export function tracksHtml(tracks: TrackObject[]): string {
  return tableWrap(
    'Play log',
    ['Started', 'Track', 'Listeners at start', 'Peak', 'Countries', 'Ended'],
    tracks.map(
      (t) =>
        `<tr><td>${time(t.startedAt)}</td><td>${t.artist ? `${esc(t.artist)} – ` : ''}<strong>${esc(t.title)}</strong></td><td class="num">${t.listenersAtStart}</td><td class="num">${t.peakListeners}</td><td>${esc(
          t.countries.map((c) => `${c.country ?? 'Unknown'} ${c.listeners}`).join(', '),
        )}</td><td>${time(t.endedAt)}</td></tr>`,
    ),
    'No tracks yet: set what plays now, or let your DJ software send it.',
  );
}

/** The stream's broadcasts as a table, newest first; episodes link to the podcast they were recorded into (`podcastId`, when known). */
export function broadcastsHtml(broadcasts: BroadcastObject[], podcastId: string | null): string {
  return tableWrap(
    'Broadcasts',
    ['Started', 'Duration', 'Peak listeners', 'Listeners', 'Listening time', 'Tracks', 'Episode', 'Catch-up'],
    broadcasts.map((b) => {
      const episode = b.episodeId
        ? podcastId
          ? `<a class="mono" href="/dashboard/podcasts/${esc(podcastId)}/episodes/${esc(b.episodeId)}">${esc(b.episodeId)}</a>`
          : `<span class="mono">${esc(b.episodeId)}</span>`
        : '<span class="muted">—</span>';
      // docs/behaviour.md §17: the broadcast's catch-up playlist, played in the page's player or linked.
      const catchUp = b.catchUpUrl
        ? `<button type="button" class="btn btn-small" data-catch-up-url="${esc(b.catchUpUrl)}">Play</button> <a class="small" href="${esc(b.catchUpUrl)}">link</a>`
        : '<span class="muted">—</span>';
      return `<tr><td>${time(b.startedAt)}${b.endedAt === null ? ` ${badge('live')}` : ''}</td><td>${formatDuration(b.durationSeconds)}</td><td class="num">${b.peakListeners}</td><td class="num">${b.totalListeners}</td><td>${formatDuration(b.listenerSeconds)}</td><td class="num">${b.trackCount}</td><td>${episode}</td><td>${catchUp}</td></tr>`;
    }),
    'No broadcast yet: the stream has not gone live.',
  );
}

/** The recent `stream.error` events as a table. */
export function errorsHtml(errors: StreamErrorItem[]): string {
  if (errors.length === 0) return '<p class="muted">No errors.</p>';
  return tableWrap(
    'Recent stream errors',
    ['Time', 'Code', 'Message'],
    errors.map((e) => `<tr><td>${time(e.created)}</td><td><code>${esc(e.code)}</code></td><td>${esc(e.message)}</td></tr>`),
    '',
  );
}
