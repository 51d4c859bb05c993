/**
 * The play log (docs/behaviour.md §11): a track starts at each now-playing change of a stream and ends at
 * the next change or the stream's end. `listenersAtStart` is the stream's live listener count at
 * the change; `peakListeners` and `countries` (distinct listeners per country heard during the
 * track) follow the listener registry while the track runs: each committed `listener.joined` /
 * `listener.left` event moves the running track's figures in memory (no work per HLS request, none
 * per API read), and the figures reach SQLite at most once a second per stream and when the track
 * ends. A recorded stream's tracks become its episode's chapters (Podcasting 2.0 JSON chapters).
 *
 * Each track belongs to the broadcast whose audio it names (`broadcastId`): the one running when it
 * starts, or — for the title a source sets on connect, before its first audio makes the stream
 * live — the broadcast that audio starts (`adopt`). A fallback episode's title belongs to no
 * broadcast: it is in the stream's play log, never in a broadcast's tracks, count or chapters.
 *
 * The lifecycle (./lifecycle.ts) calls `change` and `end` inside the transaction of the stream's
 * change and applies what they return after the commit. Knows no HTTP and no SQL text.
 */
import { newId } from '../../base/ids.js';
import { paramInvalid } from '../../base/errors/errors.js';
import type { TrackRow, TracksRepo } from '../../base/db/tracks-repo.js';
import { UnknownCursorError, type PageQuery } from '../../base/db/paginate.js';
import type { ApiEvent, Outbox } from '../../base/outbox.js';
import type { Logger } from '../../base/logger.js';
import type { WriteRetry } from '../../base/db/write-retry.js';
import { countriesFromJson, DebouncedSave, type TrackCountry } from './tally.js';
import type { NowPlayingObject, TitleFields } from './stream-object.js';

/** What the play log reads of the listener registry (the listeners room, wired by the composition root). */
export interface ListenerView {
  /** The country (ISO 3166 alpha-2, or null) of each live listener of the stream. */
  countries(streamId: string): Array<string | null>;
  /** Writes the registry's pending joins and leaves now, so that their events are announced before a track changes. */
  settle(): void;
}

/** One entry of a track's `countries`. */
export type { TrackCountry } from './tally.js';

/** The track object of the API (`trk_…`). Times ISO 8601. */
export interface TrackObject extends NowPlayingObject {
  id: string;
  object: 'track';
  streamId: string;
  endedAt: string | null;
  /** The broadcast whose audio the track names; null for a fallback episode's title. */
  broadcastId: string | null;
  listenersAtStart: number;
  peakListeners: number;
  countries: TrackCountry[];
}

/** What a change starts a track with (the stream's new now playing). */
export interface TrackStart extends TitleFields {
  accountId: string;
  streamId: string;
  /** The stream's running broadcast (null or absent between broadcasts). */
  broadcastId?: string | null;
  /** A fallback episode's title (docs/streams.md "Fallback"): never a broadcast's track. */
  fallback?: boolean;
}

/** One chapter of the Podcasting 2.0 JSON chapters format (podcast-namespace `chapters/jsonChapters.md`). `startTime` in s. */
export interface Chapter {
  startTime: number;
  title: string;
  img?: string;
  url?: string;
}

/** A Podcasting 2.0 JSON chapters document (version 1.2.0). */
export interface ChaptersDocument {
  version: '1.2.0';
  chapters: Chapter[];
}

/** The running track of a stream, as its listener events move it. */
interface Running {
  id: string;
  streamId: string;
  /** Listeners now, counted from the events since the track started. */
  current: number;
  peak: number;
  /** Distinct listeners heard during the track, by country ('' = unknown). */
  countries: Map<string, number>;
  dirty: boolean;
}

/**
 * Most chapters an episode gets: past it, the first MAX_CHAPTERS - 1 are kept and the last one, so
 * the chapters still end on what played at the end of the recording (docs/listeners.md "Title changes").
 */
export const MAX_CHAPTERS = 1000;

/** How often a running track's listener figures are written (ms). */
const SAVE_EVERY_MS = 1000;

export interface PlayLogDeps {
  repo: TracksRepo;
  outbox: Outbox;
  writes: WriteRetry;
  log: Logger;
  /** The listener registry's view: countries of a stream's listeners, and settling its pending batch. */
  listeners?: ListenerView;
}

export class PlayLog {
  /** Stream id → its running track (one per stream with a now playing that has not ended). */
  private readonly running = new Map<string, Running>();
  private readonly listeners: ListenerView | null;
  private readonly saves = new DebouncedSave(SAVE_EVERY_MS, () => this.save());
  private readonly unsubscribe: () => void;

  /**
   * Picks up the tracks an earlier run left running: no listener outlives a restart (the registry
   * starts empty), so each continues from its stored figures with no listener now.
   */
  constructor(private readonly d: PlayLogDeps) {
    this.listeners = d.listeners ?? null;
    for (const row of d.repo.allOpen()) this.running.set(row.stream_id, loaded(row));
    this.unsubscribe = d.outbox.subscribe((e) => this.onEvent(e));
  }

  /** Before a change's transaction (outside it): the registry's pending joins and leaves are written and heard. */
  settle(): void {
    try {
      this.listeners?.settle();
    } catch (e) {
      this.d.log.error('listener batch not written before a track change', { err: (e as Error).message });
    }
  }

  /**
   * Inside the transaction of a now-playing change at `atMs`: the running track of the stream ends
   * there with its final figures, and a new one starts with the live listeners. Returns what to do
   * once the transaction committed (the new track's figures start moving).
   */
  change(t: TrackStart, atMs: number): () => void {
    this.endRunning(t.streamId, atMs);
    const live = this.listeners?.countries(t.streamId) ?? [];
    const countries = new Map<string, number>();
    for (const c of live) countries.set(c ?? '', (countries.get(c ?? '') ?? 0) + 1);
    const row: TrackRow = {
      id: newId('trk'),
      account_id: t.accountId,
      stream_id: t.streamId,
      title: t.title,
      artist: t.artist,
      album: t.album,
      url: t.url,
      artwork_url: t.artworkUrl,
      started_at: atMs,
      ended_at: null,
      listeners_at_start: live.length,
      peak_listeners: live.length,
      countries: countriesJson(countries),
      broadcast_id: t.fallback ? null : (t.broadcastId ?? null),
      fallback: t.fallback ? 1 : 0,
    };
    this.d.repo.insert(row);
    return () => this.running.set(t.streamId, { id: row.id, streamId: t.streamId, current: live.length, peak: live.length, countries, dirty: false });
  }

  /**
   * Inside the transaction that starts broadcast `broadcastId` of the stream at `atMs`: the title
   * its source set before its first audio (the stream's running track, when it is a source's and
   * of no broadcast yet) is the broadcast's first track, from `atMs`.
   */
  adopt(streamId: string, broadcastId: string, atMs: number): void {
    this.d.repo.adopt(streamId, broadcastId, atMs);
  }

  /** Inside the transaction that ends the stream at `atMs`: its running track ends. Returns what to do after the commit. */
  end(streamId: string, atMs: number): () => void {
    this.endRunning(streamId, atMs);
    return () => this.running.delete(streamId);
  }

  /**
   * A page of the stream's tracks, newest first; a running track shows its figures as of now.
   * `broadcastId`: only that broadcast's tracks. The caller has checked that the stream (and the
   * broadcast) is the account's. @throws ApiError 400 for an unknown cursor
   */
  list(accountId: string, streamId: string, q: PageQuery, broadcastId?: string): { data: TrackObject[]; hasMore: boolean } {
    try {
      const page = broadcastId !== undefined ? this.d.repo.listOfBroadcast(accountId, streamId, broadcastId, q) : this.d.repo.list(accountId, streamId, q);
      const r = this.running.get(streamId);
      return { data: page.rows.map((row) => toTrackObject(row, r?.id === row.id ? r : null)), hasMore: page.hasMore };
    } catch (e) {
      if (e instanceof UnknownCursorError) throw paramInvalid(e.param, e.message);
      throw e;
    }
  }

  /**
   * The chapters of the recording of broadcast `broadcastId`, which started at `startedAtMs`: one
   * per track of the broadcast (a fallback episode's title is none: the recording holds no fallback
   * audio), `startTime` = seconds from the start (a track that began earlier starts at 0; of tracks
   * that start at the same time the last one stays), at most MAX_CHAPTERS. Null when the broadcast
   * had no track. Without a broadcast id (none known), the stream's tracks that played from
   * `startedAtMs` to `endedAtMs` (null: up to now), fallback titles left out.
   */
  chapters(streamId: string, startedAtMs: number, endedAtMs: number | null = null, broadcastId: string | null = null): ChaptersDocument | null {
    const out: Chapter[] = [];
    const rows = broadcastId !== null ? this.d.repo.ofBroadcast(broadcastId) : this.d.repo.ofStream(streamId);
    for (const t of rows) {
      if (t.fallback) continue; // the recording holds no fallback audio
      if (t.ended_at !== null && t.ended_at <= startedAtMs) continue; // an earlier broadcast's
      if (endedAtMs !== null && t.started_at > endedAtMs) continue; // a later broadcast's
      const startTime = Math.max(0, Math.round(t.started_at - startedAtMs) / 1000);
      const c: Chapter = { startTime, title: t.artist ? `${t.artist} - ${t.title}` : t.title };
      if (t.artwork_url) c.img = t.artwork_url;
      if (t.url) c.url = t.url;
      if (out.length > 0 && out[out.length - 1]!.startTime === startTime) out.pop();
      out.push(c);
    }
    if (out.length > MAX_CHAPTERS) out.splice(MAX_CHAPTERS - 1, out.length - MAX_CHAPTERS);
    return out.length === 0 ? null : { version: '1.2.0', chapters: out };
  }

  /** Writes what moved, stops the timer and stops listening (server shutdown). */
  close(): void {
    this.unsubscribe();
    this.saves.flush();
  }

  /** Ends the stream's running track (inside the caller's transaction) with its figures as they are. */
  private endRunning(streamId: string, atMs: number): void {
    const open = this.d.repo.open(streamId);
    if (!open) return;
    const r = this.running.get(streamId);
    const mine = r?.id === open.id ? r : null;
    this.d.repo.end(open.id, atMs, mine ? mine.peak : open.peak_listeners, mine ? countriesJson(mine.countries) : open.countries);
  }

  /** A committed listener event: the running track of its stream counts it. Never throws (outbox subscribers run after commits). */
  private onEvent(e: ApiEvent): void {
    if (e.type !== 'listener.joined' && e.type !== 'listener.left') return;
    try {
      const l = e.data.object as { streamId?: string; country?: string | null };
      if (typeof l.streamId !== 'string') return;
      const r = this.running.get(l.streamId);
      if (!r) return;
      if (e.type === 'listener.joined') {
        r.current++;
        r.peak = Math.max(r.peak, r.current);
        addCountry(r, l.country ?? null);
      } else r.current = Math.max(0, r.current - 1);
      r.dirty = true;
      this.saves.schedule();
    } catch (err) {
      this.d.log.error('play log: a listener event was not counted', { err: (err as Error).message });
    }
  }

  /** Writes the figures of every running track that moved (each in the stream's write order). */
  private save(): void {
    for (const r of this.running.values()) {
      if (!r.dirty) continue;
      r.dirty = false;
      const { id, peak } = r;
      const countries = countriesJson(r.countries);
      this.d.writes.run(r.streamId, 'track listeners', () => this.d.repo.setListeners(id, peak, countries));
    }
  }
}

/** A running track read back from SQLite (after a restart: nobody listens yet). */
function loaded(row: TrackRow): Running {
  const countries = countriesFromJson(row.countries);
  return { id: row.id, streamId: row.stream_id, current: 0, peak: row.peak_listeners, countries, dirty: false };
}

function addCountry(r: Running, country: string | null): void {
  const k = country ?? '';
  r.countries.set(k, (r.countries.get(k) ?? 0) + 1);
}

/** Countries most listeners first (then by code, unknown last). */
function sortedCountries(m: Map<string, number>): TrackCountry[] {
  const out = [...m].map(([k, n]) => ({ country: k === '' ? null : k, listeners: n }));
  out.sort((a, b) => b.listeners - a.listeners || (a.country === null ? 1 : b.country === null ? -1 : a.country < b.country ? -1 : a.country > b.country ? 1 : 0));
  return out;
}

const countriesJson = (m: Map<string, number>) => JSON.stringify(sortedCountries(m));
const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

/** Renders a row (with its running figures, when it runs here) as the API's track object. */
function toTrackObject(row: TrackRow, r: Running | null): TrackObject {
  let countries: TrackCountry[];
  if (r) countries = sortedCountries(r.countries);
  else {
    try {
      countries = JSON.parse(row.countries) as TrackCountry[];
    } catch {
      countries = [];
    }
  }
  return {
    id: row.id,
    object: 'track',
    streamId: row.stream_id,
    title: row.title,
    artist: row.artist,
    album: row.album,
    url: row.url,
    artworkUrl: row.artwork_url,
    startedAt: iso(row.started_at)!,
    endedAt: iso(row.ended_at),
    broadcastId: row.broadcast_id,
    listenersAtStart: row.listeners_at_start,
    peakListeners: r ? r.peak : row.peak_listeners,
    countries,
  };
}
