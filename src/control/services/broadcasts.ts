/**
 * Broadcasts (docs/streams.md "Streams and broadcasts"): a stream goes live again and again, and
 * each stretch from `live` to the end of its reconnect window is a broadcast (`brd_…`). The
 * lifecycle (./lifecycle.ts) starts and ends them inside the transaction of the stream's change.
 *
 * Listener figures count every listener who heard the broadcast, whatever the protocol (HLS,
 * WebRTC, `/listen`, the Icecast port): those already listening when it starts (during the
 * fallback, or from an earlier broadcast of the stream) count from its start — an open connection
 * at once, an HLS session once it is seen at or after the start (one that stopped requesting before
 * it, and only waits to time out, never heard it) — and then the committed `listener.joined` /
 * `listener.left` events move them while it runs (as the play log's do): `peakListeners` (most at once), `totalListeners` (distinct listeners heard during it),
 * `listenerSeconds` (the time they listened within it), `countries` (distinct listeners per
 * country). They reach SQLite at most once a second per stream and when the broadcast ends.
 *
 * Loudness (docs/streams.md "Live loudness"): the publisher's 400 ms momentary blocks, as the
 * ladder's codec process measures them, feed the running broadcast's integrated loudness (ITU-R
 * BS.1770-4 gating, ./integrated-loudness.ts), written with the figures (at most every 10 s for
 * loudness alone) and when the broadcast ends; the latest short-term and momentary values of each
 * stream stay in memory for the dashboard. A broadcast picked up after a restart keeps its stored
 * value until new blocks arrive, then measures from those. Knows no HTTP and no SQL text.
 */
import { newId } from '../../base/ids.js';
import { notFound, paramInvalid } from '../../base/errors/errors.js';
import type { BroadcastFigures, BroadcastRow, BroadcastsRepo } from '../../base/db/broadcasts-repo.js';
import { UnknownCursorError, type Page, type PageQuery } from '../../base/db/paginate.js';
import type { ApiEvent, Outbox } from '../../base/outbox.js';
import type { Logger } from '../../base/logger.js';
import type { WriteRetry } from '../../base/db/write-retry.js';
import { countriesFromJson, DebouncedSave, type TrackCountry } from './tally.js';
import { LoudnessGate } from './integrated-loudness.js';
import type { LoudnessReading } from '../../live/ports.js';

/** The broadcast object of the API. Times ISO 8601, durations in seconds. */
export interface BroadcastObject {
  id: string;
  object: 'broadcast';
  streamId: string;
  startedAt: string;
  /** Null while the broadcast runs. */
  endedAt: string | null;
  /** From `startedAt` to `endedAt` (to now while it runs). */
  durationSeconds: number;
  peakListeners: number;
  totalListeners: number;
  listenerSeconds: number;
  countries: TrackCountry[];
  /** The draft episode the broadcast's recording became, or null. */
  episodeId: string | null;
  /** Tracks of the play log that started during the broadcast. */
  trackCount: number;
  /**
   * Integrated loudness of the publisher's audio (LUFS, ITU-R BS.1770-4, to 0.1), so far while the
   * broadcast runs; null when not measured (docs/streams.md "Live loudness").
   */
  integratedLufs: number | null;
  /** The broadcast's catch-up playlist (docs/behaviour.md "Catch-up radio"), or null: catch-up off, or none of it kept. */
  catchUpUrl: string | null;
}

/** A stream's loudness now (docs/streams.md "Live loudness"), in LUFS to 0.1. */
export interface LiveLoudness {
  /** The last 3 s. */
  shortTermLufs: number;
  /** The last 400 ms. */
  momentaryLufs: number;
  /** The running broadcast's so far, or null (none runs, or nothing above the gates yet). */
  integratedLufs: number | null;
}

/** The listener figures `/stats` shows for a stream: those of its current (or last) broadcast. */
export interface BroadcastStats {
  broadcastId: string;
  peakListeners: number;
  totalListeners: number;
  listenerSeconds: number;
}

/** A running broadcast, as its listener events move it. Times in ms. */
interface Running {
  id: string;
  streamId: string;
  startedAt: number;
  current: number;
  peak: number;
  total: number;
  /** Listening time of listeners that left (ms, within the broadcast). */
  listenedMs: number;
  /**
   * Listeners here now: id → when they joined (or the broadcast started, if later), as ms since
   * `startedAt` (see `since`): a small integer V8 keeps in the table, where ms since 1970 would be
   * a 16-byte number per listener (docs/bench/listener-memory.md).
   */
  present: Map<string, number>;
  /**
   * HLS sessions live at the start but not seen since (id → country, '' = unknown): counted from the
   * start once seen during the broadcast, never when they leave without a request in it.
   */
  pending: Map<string, string>;
  countries: Map<string, number>;
  dirty: boolean;
  /** The gated loudness blocks measured during the broadcast (here, since it started or was picked up). */
  gate: LoudnessGate;
  /** The integrated loudness stored before a restart (LUFS), used until `gate` has blocks. */
  storedLufs: number | null;
  /** When loudness alone last asked for a save (ms). */
  loudnessSavedAt: number;
}

/** How often a running broadcast's figures are written (ms). */
const SAVE_EVERY_MS = 1000;
/** How often a running broadcast is written for its loudness alone (ms). */
const LOUDNESS_SAVE_EVERY_MS = 10_000;
/** A stream's latest loudness is shown for this long (ms): later, no codec process measures it. */
const LOUDNESS_FRESH_MS = 5000;

/** A live listener of a stream, as a new broadcast counts it. Times in ms since the epoch. */
export interface PresentListener {
  /** Listener id (`lst_…`), as its `listener.joined` / `listener.left` events carry it. */
  id: string;
  country: string | null;
  /** An open connection (`/listen`, the Icecast port, a WebRTC peer): it hears what plays while open. */
  open: boolean;
  /** Its last request (HLS). */
  lastSeenAt: number;
}

export interface BroadcastLogDeps {
  repo: BroadcastsRepo;
  /** The live listeners of a stream now (the listener registry): a broadcast starts with them. */
  listeners?: (streamId: string) => PresentListener[];
  /** The last request of live listener `id` of the stream (ms), or null once it left. */
  lastSeen?: (streamId: string, id: string) => number | null;
  outbox: Outbox;
  writes: WriteRetry;
  log: Logger;
  now?: () => number;
  /** The catch-up playlist of a broadcast, or null (docs/behaviour.md "Catch-up radio"); absent: always null. */
  catchUpUrl?: (row: BroadcastRow) => string | null;
}

export class BroadcastLog {
  private readonly running = new Map<string, Running>();
  /** Each stream's latest loudness reading and when it came (ms). */
  private readonly latestLoudness = new Map<string, { at: number; momentary: number; shortTerm: number }>();
  private readonly now: () => number;
  private readonly saves = new DebouncedSave(SAVE_EVERY_MS, () => this.save());
  private readonly unsubscribe: () => void;

  /** Picks up the broadcasts an earlier run left running (nobody listens after a restart yet). */
  constructor(private readonly d: BroadcastLogDeps) {
    this.now = d.now ?? Date.now;
    for (const row of d.repo.allOpen()) this.running.set(row.stream_id, loaded(row));
    this.unsubscribe = d.outbox.subscribe((e) => this.onEvent(e));
  }

  /**
   * Inside the transaction that makes stream `streamId` live at `atMs`: a new broadcast starts
   * (one still running, left by a crash, ends there first). Returns its id and what to do after the commit.
   */
  start(accountId: string, streamId: string, atMs: number): { id: string; after: () => void } {
    this.end(streamId, atMs);
    // Who listens already hears this broadcast from its start (docs/behaviour.md §2 "Broadcasts").
    const live = this.d.listeners?.(streamId) ?? [];
    const here = live.filter((l) => l.open || l.lastSeenAt >= atMs);
    const later = live.filter((l) => !l.open && l.lastSeenAt < atMs);
    const countries = new Map<string, number>();
    for (const l of here) countries.set(l.country ?? '', (countries.get(l.country ?? '') ?? 0) + 1);
    const row: BroadcastRow = {
      id: newId('brd'),
      account_id: accountId,
      stream_id: streamId,
      started_at: atMs,
      ended_at: null,
      peak_listeners: here.length,
      total_listeners: here.length,
      listener_ms: 0,
      countries: countriesJson(countries),
      episode_id: null,
      integrated_lufs: null,
    };
    this.d.repo.insert(row);
    return {
      id: row.id,
      after: () => {
        const r = loaded(row);
        for (const l of here) r.present.set(l.id, 0);
        for (const l of later) r.pending.set(l.id, l.country ?? '');
        r.current = here.length;
        this.running.set(streamId, r);
      },
    };
  }

  /**
   * Inside the transaction that makes stream `streamId` idle at `atMs`: its running broadcast ends
   * with its final figures (listeners still present count up to `atMs`). Returns the broadcast's
   * id (null when none ran) and what to do after the commit.
   */
  end(streamId: string, atMs: number): { id: string | null; after: () => void } {
    const open = this.d.repo.open(streamId);
    if (!open) return { id: null, after: () => {} };
    const r = this.running.get(streamId);
    if (r?.id === open.id) this.heard(r);
    const f = r?.id === open.id ? figures(r, atMs) : stored(open);
    this.d.repo.end(open.id, atMs, f);
    return {
      id: open.id,
      after: () => {
        if (this.running.get(streamId)?.id === open.id) this.running.delete(streamId);
      },
    };
  }

  /** The id of the stream's running broadcast as stored (inside a transaction: as of it), or null between broadcasts. */
  runningId(streamId: string): string | null {
    return this.d.repo.open(streamId)?.id ?? null;
  }

  /** The broadcast a recording that started at `startedAtMs` belongs to: the first one since (the newest when unknown). */
  forRecording(streamId: string, startedAtMs: number): BroadcastRow | undefined {
    return (startedAtMs > 0 ? this.d.repo.firstSince(streamId, startedAtMs) : undefined) ?? this.d.repo.latest(streamId);
  }

  /** Links the episode a broadcast's recording became. */
  setEpisode(broadcastId: string, episodeId: string): void {
    this.d.repo.setEpisode(broadcastId, episodeId);
  }

  /** The stream's current broadcast while one runs, else its last one; null when it never went live. */
  stats(streamId: string): BroadcastStats | null {
    const row = this.d.repo.latest(streamId);
    if (!row) return null;
    const o = this.toObject(row);
    return { broadcastId: o.id, peakListeners: o.peakListeners, totalListeners: o.totalListeners, listenerSeconds: o.listenerSeconds };
  }

  /**
   * A page of the stream's broadcasts, newest first. The caller has checked that the stream is
   * the account's. @throws ApiError 400 for an unknown cursor
   */
  list(accountId: string, streamId: string, q: PageQuery): { data: BroadcastObject[]; hasMore: boolean } {
    let page: Page<BroadcastRow>;
    try {
      page = this.d.repo.list(accountId, streamId, q);
    } catch (e) {
      if (e instanceof UnknownCursorError) throw paramInvalid(e.param, e.message);
      throw e;
    }
    return { data: page.rows.map((r) => this.toObject(r)), hasMore: page.hasMore };
  }

  /** Broadcast `id` of the stream. @throws ApiError 404 */
  get(accountId: string, streamId: string, id: string): BroadcastObject {
    return this.toObject(this.row(accountId, streamId, id));
  }

  /** The row of broadcast `id` of the stream. @throws ApiError 404 */
  row(accountId: string, streamId: string, id: string): BroadcastRow {
    const row = this.d.repo.get(id, streamId, accountId);
    if (!row) throw notFound('broadcast', id);
    return row;
  }

  /**
   * A second of the stream's loudness (docs/streams.md "Live loudness"): kept as the stream's
   * latest, and its momentary blocks count towards the running broadcast's integrated loudness.
   * Never throws.
   */
  onLoudness(streamId: string, reading: LoudnessReading): void {
    const momentary = reading.momentary.at(-1);
    if (momentary === undefined) return;
    const now = this.now();
    this.latestLoudness.set(streamId, { at: now, momentary, shortTerm: reading.shortTerm });
    const r = this.running.get(streamId);
    if (!r) return;
    r.gate.add(...reading.momentary);
    if (now - r.loudnessSavedAt < LOUDNESS_SAVE_EVERY_MS) return;
    r.loudnessSavedAt = now;
    r.dirty = true;
    this.saves.schedule();
  }

  /** The stream's loudness now, or null when none was measured in the last 5 s (no codec process, nobody publishing). */
  loudness(streamId: string): LiveLoudness | null {
    const l = this.latestLoudness.get(streamId);
    if (!l || this.now() - l.at > LOUDNESS_FRESH_MS) return null;
    const r = this.running.get(streamId);
    const integrated = r ? r.gate.integrated() ?? r.storedLufs : null;
    return { shortTermLufs: tenth(l.shortTerm), momentaryLufs: tenth(l.momentary), integratedLufs: integrated === null ? null : tenth(integrated) };
  }

  /** Writes what moved, stops the timer and stops listening (server shutdown). */
  close(): void {
    this.unsubscribe();
    this.saves.flush();
  }

  /** Renders a row (with its running figures, when it runs here). */
  private toObject(row: BroadcastRow): BroadcastObject {
    const r = this.running.get(row.stream_id);
    const mine = row.ended_at === null && r?.id === row.id ? r : null;
    if (mine) this.heard(mine);
    const now = this.now();
    const f = mine ? figures(mine, now) : stored(row);
    let countries: TrackCountry[];
    try {
      countries = JSON.parse(f.countries) as TrackCountry[];
    } catch {
      countries = [];
    }
    return {
      id: row.id,
      object: 'broadcast',
      streamId: row.stream_id,
      startedAt: new Date(row.started_at).toISOString(),
      endedAt: row.ended_at === null ? null : new Date(row.ended_at).toISOString(),
      durationSeconds: Math.max(0, Math.round(((row.ended_at ?? now) - row.started_at) / 100) / 10),
      peakListeners: f.peak,
      totalListeners: f.total,
      listenerSeconds: Math.round(f.listenerMs / 100) / 10,
      countries,
      episodeId: row.episode_id,
      trackCount: this.d.repo.trackCount(row.id),
      integratedLufs: f.integratedLufs === null ? null : Math.round(f.integratedLufs * 10) / 10,
      catchUpUrl: this.d.catchUpUrl?.(row) ?? null,
    };
  }

  /** A committed listener event: the running broadcast of its stream counts it. Never throws. */
  private onEvent(e: ApiEvent): void {
    if (e.type !== 'listener.joined' && e.type !== 'listener.left') return;
    try {
      const l = e.data.object as { id?: string; streamId?: string; country?: string | null; connectedAt?: string; lastSeenAt?: string };
      if (typeof l.streamId !== 'string' || typeof l.id !== 'string') return;
      const r = this.running.get(l.streamId);
      if (!r) return;
      if (e.type === 'listener.joined') {
        if (r.present.has(l.id) || r.pending.has(l.id)) return;
        const joined = Math.max(r.startedAt, Date.parse(l.connectedAt ?? '') || this.now());
        r.present.set(l.id, since(r, joined));
        count(r, l.country ?? '');
      } else {
        const seen = Date.parse(l.lastSeenAt ?? '') || this.now();
        const joined = r.present.get(l.id);
        if (joined !== undefined) {
          r.present.delete(l.id);
          r.current = Math.max(0, r.current - 1);
          r.listenedMs += Math.max(0, seen - (r.startedAt + joined));
        } else if (!this.leftPending(r, l.id, seen)) return; // left before this broadcast
      }
      r.dirty = true;
      this.saves.schedule();
    } catch (err) {
      this.d.log.error('broadcasts: a listener event was not counted', { err: (err as Error).message });
    }
  }

  /**
   * The pending HLS sessions of `r` seen since it started heard it: they count from its start (as
   * listeners there then). Those that left are settled by their `listener.left`.
   */
  private heard(r: Running): void {
    if (r.pending.size === 0 || !this.d.lastSeen) return;
    for (const [id, country] of r.pending) {
      const seen = this.d.lastSeen(r.streamId, id);
      if (seen === null || seen < r.startedAt) continue;
      r.pending.delete(id);
      r.present.set(id, 0);
      count(r, country);
      r.dirty = true;
      this.saves.schedule();
    }
  }

  /**
   * A pending session of `r` left, last seen at `seen` (ms): seen during the broadcast, it heard it
   * from the start to then; else never. False when it was not pending.
   */
  private leftPending(r: Running, id: string, seen: number): boolean {
    const country = r.pending.get(id);
    if (country === undefined) return false;
    r.pending.delete(id);
    if (seen >= r.startedAt) {
      count(r, country);
      r.current--;
      r.listenedMs += seen - r.startedAt;
    }
    return true;
  }

  /** Writes the figures of every running broadcast that moved (each in its stream's write order). */
  private save(): void {
    const now = this.now();
    for (const r of this.running.values()) {
      this.heard(r);
      if (!r.dirty) continue;
      r.dirty = false;
      const { id } = r;
      const f = figures(r, now);
      this.d.writes.run(r.streamId, 'broadcast listeners', () => this.d.repo.setFigures(id, f));
    }
  }
}

/** A running broadcast read back from SQLite (after a restart, or just started: nobody listens yet). */
function loaded(row: BroadcastRow): Running {
  const countries = countriesFromJson(row.countries);
  return {
    id: row.id,
    streamId: row.stream_id,
    startedAt: row.started_at,
    current: 0,
    peak: row.peak_listeners,
    total: row.total_listeners,
    listenedMs: row.listener_ms,
    present: new Map(),
    pending: new Map(),
    countries,
    dirty: false,
    gate: new LoudnessGate(),
    storedLufs: row.integrated_lufs,
    loudnessSavedAt: 0,
  };
}

/** The figures of a broadcast as stored. */
function stored(row: BroadcastRow): BroadcastFigures {
  return { peak: row.peak_listeners, total: row.total_listeners, listenerMs: row.listener_ms, countries: row.countries, integratedLufs: row.integrated_lufs };
}

/** `lufs` to 0.1 LU. */
function tenth(lufs: number): number {
  return Math.round(lufs * 10) / 10;
}

/** Countries ('' = unknown) as stored: JSON [{country, listeners}], most listeners first. */
function countriesJson(m: Map<string, number>): string {
  const countries = [...m].map(([k, n]) => ({ country: k === '' ? null : k, listeners: n }));
  countries.sort((a, b) => b.listeners - a.listeners || (a.country ?? '~').localeCompare(b.country ?? '~'));
  return JSON.stringify(countries);
}

/** One more listener of `r` now, from `country` ('' = unknown): current, total, peak and countries. */
function count(r: Running, country: string): void {
  r.current++;
  r.total++;
  r.peak = Math.max(r.peak, r.current);
  r.countries.set(country, (r.countries.get(country) ?? 0) + 1);
}

/**
 * `atMs` (ms since the epoch) as ms since `r.startedAt`, exactly: a whole difference goes through
 * `Math.floor`, which gives back a small integer where V8's interpreter boxes the difference of two
 * large numbers in a new 16-byte number.
 */
function since(r: Running, atMs: number): number {
  const d = atMs - r.startedAt;
  const whole = Math.floor(d);
  return whole === d ? whole : d;
}

/** The figures of a running broadcast as of `atMs` (listeners present count up to then). */
function figures(r: Running, atMs: number): BroadcastFigures {
  let ms = r.listenedMs;
  for (const joined of r.present.values()) ms += Math.max(0, atMs - (r.startedAt + joined));
  const integratedLufs = r.gate.blocks > 0 ? r.gate.integrated() : r.storedLufs;
  return { peak: r.peak, total: r.total, listenerMs: Math.round(ms), countries: countriesJson(r.countries), integratedLufs };
}
