/**
 * Renders a podcast's RSS 2.0 feed (docs/behaviour.md §5, §9 "Podcasts"; Apple Podcasts' RSS
 * requirements; Podcasting 2.0 namespace) with xmlbuilder2 — never by string concatenation, so
 * every text and attribute is escaped by the library. Pure: rows in, UTF-8 bytes out.
 *
 * Channel: title, link, description, language, generator, lastBuildDate, atom:link rel=self,
 * itunes:author, itunes:owner (name, email), itunes:image + image, itunes:category (with
 * subcategory), itunes:explicit, itunes:type, itunes:complete (archived), podcast:guid,
 * podcast:locked, podcast:liveItem (pending/live/ended; the listening URL as enclosure, HLS as
 * podcast:alternateEnclosure). Item: title, description, guid
 * (isPermaLink=false), pubDate, enclosure (url, length, type), itunes:title, itunes:duration,
 * itunes:episode, itunes:season, itunes:episodeType, itunes:explicit, podcast:season, podcast:episode,
 * podcast:chapters (JSON chapters: a recorded stream's tracks, docs/behaviour.md §11, or set by the
 * API), content:encoded and itunes:summary for a description in HTML (./html.ts). Since the
 * transcripts and feed tags of docs/podcasts.md: channel atom:link rel=hub (a WebSub hub is
 * configured), podcast:person, podcast:txt, podcast:podroll; item podcast:transcript
 * (rel=captions for WebVTT/SubRip), podcast:person, podcast:soundbite.
 */
import { create } from 'xmlbuilder2';
import type { EpisodeRow, PodcastRow } from '../../base/db/podcasts-repo.js';
import { splitCategory } from './categories.js';
import { htmlToText, looksLikeHtml, sanitizeHtml } from './html.js';

export const NS = {
  itunes: 'http://www.itunes.com/dtds/podcast-1.0.dtd',
  podcast: 'https://podcastindex.org/namespace/1.0',
  atom: 'http://www.w3.org/2005/Atom',
  content: 'http://purl.org/rss/1.0/modules/content/',
} as const;

/** The MIME type of Podcasting 2.0 JSON chapters (podcast-namespace `chapters/jsonChapters.md`). */
export const CHAPTERS_TYPE = 'application/json+chapters';

/** A stream recording into the podcast, as `podcast:liveItem` shows it. Times in ms. */
export interface LiveItemInput {
  id: string;
  title: string;
  status: 'pending' | 'live' | 'ended';
  start: number;
  end: number | null;
  /** The HLS playlist URL (the liveItem's `podcast:alternateEnclosure` and content link). */
  hlsUrl: string;
  /** Icecast-style progressive listening (the liveItem's enclosure, docs/behaviour.md §10) and its MIME type. */
  listenUrl: string;
  listenType: string;
}

/** Everything one feed shows. `episodes` are the published ones, newest first. */
export interface FeedInput {
  podcast: PodcastRow;
  feedUrl: string;
  episodes: EpisodeRow[];
  /** Enclosure URL of an episode (its `audioUrl`). */
  audioUrl: (e: EpisodeRow) => string;
  /** Its chapters' URL (`chaptersUrl`), for an episode with chapters. */
  chaptersUrl?: (e: EpisodeRow) => string;
  /** Its transcript's URL (`transcriptUrl`), for an episode with a transcript. */
  transcriptUrl?: (e: EpisodeRow) => string;
  /** The WebSub hub the feed names (`<atom:link rel="hub">`), when one is configured. */
  hubUrl?: string | undefined;
  liveItems: LiveItemInput[];
  /** Last change of anything in the feed (ms): `lastBuildDate`. */
  lastModified: number;
}

// XML 1.0 forbids these characters even escaped; strip them from user text.
const INVALID_XML = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
const clean = (s: string) => s.replace(INVALID_XML, '');
type XMLBuilder = ReturnType<typeof create>;
const rfc2822 = (ms: number) => new Date(ms).toUTCString();

function text(parent: XMLBuilder, name: string, value: string | number): XMLBuilder {
  return parent.ele(name).txt(clean(String(value)));
}

/** A JSON array column (`'[]'` or absent when none). */
const list = <T>(json: string | undefined): T[] => (json ? (JSON.parse(json) as T[]) : []);

/** Transcript types whose cues are timed captions (`rel="captions"`). */
const CAPTION_TYPES = new Set(['text/vtt', 'application/x-subrip']);

/** `podcast:person` elements (namespace defaults: role host, group cast). */
function persons(parent: XMLBuilder, json: string | undefined): void {
  for (const p of list<{ name: string; role?: string; group?: string; href?: string; img?: string }>(json)) {
    const attrs: Record<string, string> = {};
    if (p.role) attrs.role = clean(p.role);
    if (p.group) attrs.group = clean(p.group);
    if (p.img) attrs.img = clean(p.img);
    if (p.href) attrs.href = clean(p.href);
    parent.ele('podcast:person', attrs).txt(clean(p.name));
  }
}

/** Renders the feed document as UTF-8 bytes. */
export function renderFeed(f: FeedInput): Uint8Array {
  const doc = create({ version: '1.0', encoding: 'UTF-8' });
  const rss = doc.ele('rss', {
    version: '2.0',
    'xmlns:itunes': NS.itunes,
    'xmlns:podcast': NS.podcast,
    'xmlns:atom': NS.atom,
    'xmlns:content': NS.content,
  });
  const ch = rss.ele('channel');
  channel(ch, f);
  const p = f.podcast;
  const author = p.author ?? p.owner_name;
  for (const live of f.liveItems) liveItem(ch, live, p, author);
  for (const e of f.episodes) item(ch, e, f);
  return Buffer.from(doc.end({ prettyPrint: false }), 'utf8');
}

/** The channel's own elements (everything before the live items and items). */
function channel(ch: XMLBuilder, f: FeedInput): void {
  const p = f.podcast;
  text(ch, 'title', p.title);
  text(ch, 'link', p.link ?? f.feedUrl);
  text(ch, 'description', p.description || p.title);
  text(ch, 'language', p.language);
  text(ch, 'generator', 'Skylark');
  text(ch, 'lastBuildDate', rfc2822(f.lastModified));
  ch.ele('atom:link', { href: f.feedUrl, rel: 'self', type: 'application/rss+xml' });
  if (f.hubUrl) ch.ele('atom:link', { href: f.hubUrl, rel: 'hub' });
  const author = p.author ?? p.owner_name;
  if (author) text(ch, 'itunes:author', author);
  if (p.owner_email) {
    const owner = ch.ele('itunes:owner');
    if (p.owner_name ?? p.author) text(owner, 'itunes:name', (p.owner_name ?? p.author)!);
    text(owner, 'itunes:email', p.owner_email);
  }
  if (p.image_url) {
    ch.ele('itunes:image', { href: clean(p.image_url) });
    const img = ch.ele('image');
    text(img, 'url', p.image_url);
    text(img, 'title', p.title);
    text(img, 'link', p.link ?? f.feedUrl);
  }
  if (p.category) {
    const [top, sub] = splitCategory(p.category);
    const cat = ch.ele('itunes:category', { text: top });
    if (sub) cat.ele('itunes:category', { text: sub });
  }
  text(ch, 'itunes:explicit', p.explicit ? 'true' : 'false');
  text(ch, 'itunes:type', p.type);
  if (p.status === 'archived') text(ch, 'itunes:complete', 'Yes');
  text(ch, 'podcast:guid', p.podcast_guid);
  const locked = ch.ele('podcast:locked', p.owner_email ? { owner: clean(p.owner_email) } : {});
  locked.txt(p.locked ? 'yes' : 'no');
  persons(ch, p.persons);
  for (const t of list<{ purpose?: string; value: string }>(p.txt)) ch.ele('podcast:txt', t.purpose ? { purpose: clean(t.purpose) } : {}).txt(clean(t.value));
  const podroll = list<{ feedGuid: string; feedUrl?: string }>(p.podroll);
  if (podroll.length > 0) {
    const roll = ch.ele('podcast:podroll');
    for (const r of podroll) roll.ele('podcast:remoteItem', { feedGuid: r.feedGuid, ...(r.feedUrl ? { feedUrl: clean(r.feedUrl) } : {}) });
  }
}

/** One `podcast:liveItem` (`author`: the channel's author, or null). */
function liveItem(ch: XMLBuilder, live: LiveItemInput, p: PodcastRow, author: string | null): void {
  const li = ch.ele('podcast:liveItem', {
    status: live.status,
    start: new Date(live.start).toISOString(),
    ...(live.end !== null ? { end: new Date(live.end).toISOString() } : {}),
  });
  text(li, 'title', live.title);
  li.ele('guid', { isPermaLink: 'false' }).txt(live.id);
  // The enclosure every podcast app plays (one long audio response); HLS as the alternate.
  li.ele('enclosure', { url: live.listenUrl, type: live.listenType, length: '0' });
  li.ele('podcast:alternateEnclosure', { type: 'application/x-mpegURL', length: '0', title: 'HLS' }).ele('podcast:source', { uri: live.hlsUrl, contentType: 'application/x-mpegURL' });
  li.ele('podcast:contentLink', { href: live.listenUrl }).txt(clean(`Listen live: ${live.title}`));
  if (author) text(li, 'author', p.owner_email ? `${p.owner_email} (${author})` : author);
}

/** One published episode's `item`. */
function item(ch: XMLBuilder, e: EpisodeRow, f: FeedInput): void {
  const p = f.podcast;
  const it = ch.ele('item');
  text(it, 'title', e.title);
  // Show notes in HTML: sanitised into content:encoded, their plain text in description (docs/podcasts.md "Show notes").
  const isHtml = looksLikeHtml(e.description);
  const plain = (isHtml ? htmlToText(e.description) : e.description) || e.title;
  text(it, 'description', plain);
  if (isHtml) {
    // CDATA: the library leaves `&name;` in text unescaped, which would turn escaped markup into markup.
    // The sanitiser escapes every `>` of text, so its output never holds `]]>`.
    it.ele('content:encoded').dat(clean(sanitizeHtml(e.description)));
    text(it, 'itunes:summary', plain);
  }
  it.ele('guid', { isPermaLink: 'false' }).txt(clean(e.guid ?? e.id));
  text(it, 'pubDate', rfc2822(e.published_at ?? e.updated_at));
  it.ele('enclosure', { url: f.audioUrl(e), length: String(e.audio_size ?? 0), type: e.audio_mime ?? 'audio/mpeg' });
  // A loudness-normalised episode also offers the upload as it came (docs/podcasts.md "Loudness").
  if (e.original_audio_file) {
    it.ele('podcast:alternateEnclosure', { type: e.audio_mime ?? 'audio/mpeg', length: String(e.original_audio_size ?? 0), title: 'Original (not loudness-normalised)' })
      .ele('podcast:source', { uri: f.audioUrl({ ...e, audio_file: e.original_audio_file }) });
  }
  text(it, 'itunes:title', e.title);
  if (e.audio_duration !== null) text(it, 'itunes:duration', Math.max(1, Math.round(e.audio_duration)));
  if (e.episode_number !== null) text(it, 'itunes:episode', e.episode_number);
  if (e.season !== null) text(it, 'itunes:season', e.season);
  text(it, 'itunes:episodeType', e.episode_type);
  text(it, 'itunes:explicit', e.explicit ? 'true' : 'false');
  if (p.image_url) it.ele('itunes:image', { href: clean(p.image_url) });
  if (e.season !== null) text(it, 'podcast:season', e.season);
  if (e.episode_number !== null) text(it, 'podcast:episode', e.episode_number);
  if (e.chapters && f.chaptersUrl) it.ele('podcast:chapters', { url: f.chaptersUrl(e), type: CHAPTERS_TYPE });
  if (e.transcript && e.transcript_type && f.transcriptUrl) {
    it.ele('podcast:transcript', { url: f.transcriptUrl(e), type: e.transcript_type, ...(CAPTION_TYPES.has(e.transcript_type) ? { rel: 'captions' } : {}) });
  }
  persons(it, e.persons);
  for (const b of list<{ startTime: number; duration: number; title?: string }>(e.soundbites)) {
    const sb = it.ele('podcast:soundbite', { startTime: String(b.startTime), duration: String(b.duration) });
    if (b.title) sb.txt(clean(b.title));
  }
}
