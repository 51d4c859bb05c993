/**
 * The stream lifecycle (docs/streams.md): who may publish, `idle` → `live` (`stream.started`, a new
 * broadcast), `live` → `idle` after the reconnect window (`stream.ended`, the broadcast ends) and
 * `live` again at the next publish — a stream has no terminal state; `stream.error`, what plays
 * now (`stream.now_playing`, the play log's tracks), and what becomes of a broadcast's recording
 * (its own draft episode with its own chapters). Each change and its event commit in one
 * transaction (the outbox). Implements ingest's port; knows no media, no HTTP and no SQL text.
 *
 * Ingest calls arrive from socket reads and timers: nothing here throws. A write SQLite cannot take
 * now (a lock held elsewhere, a full disk) is retried in order (WriteRetry), with the time of the
 * change as it happened.
 */
import type { StreamRow, StreamsRepo } from '../../base/db/streams-repo.js';
import type { Database } from '../../base/db/database.js';
import type { Outbox } from '../../base/outbox.js';
import { UnitOfWork } from '../../base/db/unit-of-work.js';
import type { Logger } from '../../base/logger.js';
import type { PublicUrls } from '../../base/config.js';
import type { IngestPort, NowPlaying, PublishDecision, StreamError, Recording, FallbackItem, FallbackSetting, SourceChangeReason, StreamSource, LoudnessReading } from '../../live/ports.js';
import { isAudioCodec } from '../../live/ports.js';
import { hashToken, tokenMatches } from '../../base/auth/secrets.js';
import { fieldsOf, ladderKbps, nowPlayingObject, recordingOf, sameNowPlaying, toStreamObject } from './stream-object.js';
import type { WriteRetry } from '../../base/db/write-retry.js';
import type { ChaptersDocument, PlayLog } from './play-log.js';
import type { BroadcastLog } from './broadcasts.js';

/** Makes a draft episode of a finished recording (the podcasts side), with the chapters of its tracks (null: none). */
export type RecordingHandler = (r: {
  accountId: string;
  podcastId: string;
  streamId: string;
  title: string;
  filePath: string;
  chapters: ChaptersDocument | null;
  /** `auto`: published once its audio is final (docs/streams.md "Listen again"); `draft`: stays a draft. */
  publish: 'draft' | 'auto';
}) => Promise<unknown>;

/**
 * The calendar date of instant `ms` in IANA time zone `timeZone`, as `YYYY-MM-DD` (ISO 8601; an
 * unknown zone falls back to UTC): the date in a broadcast's episode title.
 */
export function broadcastDate(ms: number, timeZone: string): string {
  let parts: Intl.DateTimeFormatPart[];
  try {
    parts = new Intl.DateTimeFormat('en-US', { timeZone, year: 'numeric', month: '2-digit', day: '2-digit' }).formatToParts(ms);
  } catch {
    return new Date(ms).toISOString().slice(0, 10);
  }
  const part = (t: string) => parts.find((p) => p.type === t)?.value ?? '';
  return `${part('year')}-${part('month')}-${part('day')}`;
}

export interface LifecycleDeps {
  db: Database;
  streams: StreamsRepo;
  outbox: Outbox;
  log: Logger;
  urls: () => PublicUrls;
  writes: WriteRetry;
  /** Live listeners of a stream (for the stream object in events). */
  listenerCount: (streamId: string) => number;
  /** Whether a draft episode was already made from the stream's recording (a retried hand-over). */
  hasRecordingEpisode?: (streamId: string) => boolean;
  onRecording?: RecordingHandler;
  /** The play log: tracks start at now-playing changes and end with the stream. */
  playLog?: PlayLog;
  /** Broadcasts: one starts when the stream goes live, and ends when it goes idle. */
  broadcasts?: BroadcastLog;
  /** The fallback episodes of the account that exist and have audio, in the order given (docs/streams.md "Fallback"). */
  fallbackItems?: (accountId: string, episodeIds: string[]) => FallbackItem[];
  now?: () => number;
}

export class StreamLifecycle implements IngestPort {
  private readonly now: () => number;
  /** Every write of the lifecycle: one transaction, events after the commit (src/base/db/unit-of-work.ts). */
  private readonly uow: UnitOfWork;

  constructor(private readonly d: LifecycleDeps) {
    this.now = d.now ?? Date.now;
    this.uow = new UnitOfWork(d.db, d.outbox);
  }

  authorizePublish(streamId: string, key: string): PublishDecision {
    let row: StreamRow | undefined;
    try {
      row = this.d.streams.getAny(streamId);
    } catch (e) {
      return { ok: false, reason: `database unavailable: ${(e as Error).message}` };
    }
    if (!row) return { ok: false, reason: `unknown stream ${streamId}` };
    if (!tokenMatches(key, row.stream_key_hash)) return { ok: false, reason: `wrong stream key for ${row.id}` };
    const grant = this.authorizeRow(row);
    return grant ? { ok: true, grant } : { ok: false, reason: `stream ${row.id} has an unknown codec` };
  }

  authorizeVouchedPublish(streamId: string): PublishDecision {
    let row: StreamRow | undefined;
    try {
      row = this.d.streams.getAny(streamId);
    } catch (e) {
      return { ok: false, reason: `database unavailable: ${(e as Error).message}` };
    }
    if (!row) return { ok: false, reason: `unknown stream ${streamId}` };
    const grant = this.authorizeRow(row);
    return grant ? { ok: true, grant } : { ok: false, reason: `stream ${row.id} has an unknown codec` };
  }

  streamOfMount(mount: string): string | null {
    try {
      return this.d.streams.byIcecastMount(mount)?.id ?? null;
    } catch (e) {
      this.d.log.error('cannot look the Icecast mount up', { mount, err: (e as Error).message });
      return null;
    }
  }

  isStreamKey(key: string): boolean {
    try {
      return this.d.streams.hasKeyHash(hashToken(key));
    } catch {
      return false;
    }
  }

  /** What the stream's media is made of (a publish's grant, the fallback's settings); null for an unknown codec. */
  private authorizeRow(row: StreamRow): FallbackSetting['grant'] | null {
    if (!isAudioCodec(row.codec)) return null;
    return { streamId: row.id, codec: row.codec, ladderKbps: ladderKbps(row.quality, row.codec), recording: row.recording !== null, latencyMode: row.latency_mode };
  }

  streamState(streamId: string): { status: 'idle' | 'live'; reconnectWindowS: number } | null {
    try {
      const row = this.d.streams.getAny(streamId);
      return row ? { status: row.status === 'live' ? 'live' : 'idle', reconnectWindowS: row.reconnect_window } : null;
    } catch (e) {
      this.d.log.error('cannot read the stream; treating it as live with no reconnect window', { streamId, err: (e as Error).message });
      return { status: 'live', reconnectWindowS: 0 };
    }
  }

  liveStreams(): Array<{ streamId: string; reconnectWindowS: number }> {
    return this.d.streams.allLive().map((r) => ({ streamId: r.id, reconnectWindowS: r.reconnect_window }));
  }

  /**
   * The stream went live at `atMs`: a new broadcast starts with the stream's listeners and the
   * title its source set before this first audio; `stream.started` carries its id as `broadcastId`.
   */
  onLive(streamId: string, atMs: number): void {
    this.d.writes.run(streamId, 'stream.started', () => {
      this.d.playLog?.settle(); // listeners that joined so far are the broadcast's from its start
      let after: (() => void) | undefined;
      this.transact(() => {
        if (!this.d.streams.markLive(streamId, atMs)) return;
        const row = this.d.streams.getAny(streamId)!;
        const b = this.d.broadcasts?.start(row.account_id, streamId, atMs);
        if (b) this.d.playLog?.adopt(streamId, b.id, atMs);
        after = b?.after;
        this.d.outbox.record(row.account_id, 'stream.started', { object: this.object(row), broadcastId: b?.id ?? null });
      });
      after?.();
    });
  }

  /**
   * The reconnect window passed (or the stream was deleted) at `atMs`: the stream is `idle` again
   * (`endedAt` = the end of this broadcast), its broadcast ends, and `stream.ended` carries the
   * broadcast's id as `broadcastId`. The next publish with the same key starts a new broadcast.
   */
  onEnded(streamId: string, atMs: number): void {
    this.d.writes.run(streamId, 'stream.ended', () => {
      this.d.playLog?.settle(); // listener events so far belong to the broadcast that ends
      const afters: Array<() => void> = [];
      this.transact(() => {
        if (!this.d.streams.markIdle(streamId, atMs)) return;
        const row = this.d.streams.getAny(streamId)!;
        const t = this.d.playLog?.end(streamId, atMs);
        if (t) afters.push(t);
        const b = this.d.broadcasts?.end(streamId, atMs);
        if (b) afters.push(b.after);
        this.d.outbox.record(row.account_id, 'stream.ended', { object: this.object(row), broadcastId: b?.id ?? null });
      });
      for (const f of afters) f();
    });
  }

  /** The stream's fallback with the episodes playable now; null without one, or when none of its episodes is playable. */
  fallback(streamId: string): FallbackSetting | null {
    let row: StreamRow | undefined;
    try {
      row = this.d.streams.getAny(streamId);
    } catch (e) {
      this.d.log.error('cannot read the stream\'s fallback', { streamId, err: (e as Error).message });
      return null;
    }
    if (!row?.fallback || !this.d.fallbackItems) return null;
    const f = JSON.parse(row.fallback) as { episodeIds: string[]; order: 'sequential' | 'shuffle'; silenceSeconds: number | null };
    const items = this.d.fallbackItems(row.account_id, f.episodeIds);
    const grant = this.authorizeRow(row);
    if (items.length === 0 || !grant) return null;
    const liveFormat = row.live_sample_rate && row.live_channels ? { sampleRate: row.live_sample_rate, channels: row.live_channels } : null;
    return { grant, plan: { items, order: f.order, silenceSeconds: f.silenceSeconds }, liveFormat };
  }

  fallbackStreams(): string[] {
    return this.d.streams.resetSources();
  }

  /** The streams that have a fallback now (changes nothing). */
  fallbackStreamIds(): string[] {
    return this.d.streams.withFallback();
  }

  /** The stream's `source` changed: stored, and `stream.source_changed` `{object, source, reason}` when there is a reason (docs/streams.md "Fallback"). */
  onSourceChanged(streamId: string, source: StreamSource, reason: SourceChangeReason | null): void {
    this.write(streamId, 'stream.source_changed', () => {
      const row = this.d.streams.getAny(streamId);
      if (!row || !this.d.streams.setSource(streamId, source)) return;
      if (reason) this.d.outbox.record(row.account_id, 'stream.source_changed', { object: this.object({ ...row, source }), source, reason });
    });
  }

  /** A live source's sample rate and channels: kept for the stream's fallback (docs/streams.md "Fallback"). */
  onLiveFormat(streamId: string, format: { sampleRate: number; channels: number }): void {
    this.write(streamId, 'live format', () => this.d.streams.setLiveFormat(streamId, format.sampleRate, format.channels));
  }

  /** A second of the publisher's loudness: the broadcast log keeps it (docs/streams.md "Live loudness"). */
  onLoudness(streamId: string, reading: LoudnessReading): void {
    try {
      this.d.broadcasts?.onLoudness(streamId, reading);
    } catch (e) {
      this.d.log.error('loudness reading dropped', { streamId, err: (e as Error).message });
    }
  }

  onError(streamId: string, error: StreamError): void {
    this.d.log.warn('stream error', { streamId, code: error.code });
    this.write(streamId, `stream.error ${error.code}`, () => {
      const row = this.d.streams.getAny(streamId);
      if (row) this.d.outbox.record(row.account_id, 'stream.error', { object: this.object(row), error });
    });
  }

  /**
   * Runs `change` in one transaction through the write retry (in order per stream); its events
   * are announced after the commit, and forgotten when the transaction failed.
   */
  private write(streamId: string, what: string, change: () => void): void {
    this.d.writes.run(streamId, what, () => this.transact(change));
  }

  /** Runs `change` in one transaction; its events are announced after the commit, forgotten on failure. @throws what the transaction threw */
  private transact(change: () => void): void {
    this.uow.run(change);
  }

  /**
   * What plays now changed (docs/behaviour.md §11; an ingest source or the API, through ingest,
   * which caps the changes per stream: docs/listeners.md "Title changes"), started at
   * `np.startedAtMs` (now when absent): the stream's `nowPlaying`, a new track in the play log (the
   * running one ends), and `stream.now_playing`, in one transaction. The same values as now are not
   * a change; an ended or deleted stream takes none. `null`: see `clearNowPlaying`.
   */
  onMetadata(streamId: string, np: NowPlaying | null): void {
    if (np === null) return this.clearNowPlaying(streamId);
    const atMs = np.startedAtMs ?? this.now();
    const value = nowPlayingObject(np, atMs);
    const json = JSON.stringify(value);
    this.d.writes.run(streamId, 'now playing', () => {
      this.d.playLog?.settle(); // listener events so far belong to the track that ends
      let after: (() => void) | undefined;
      this.transact(() => {
        const row = this.d.streams.getAny(streamId);
        if (!row || sameNowPlaying(row.now_playing, value)) return;
        this.d.streams.setNowPlaying(streamId, json);
        const fallback = np.fallback === true;
        const broadcastId = fallback ? null : (this.d.broadcasts?.runningId(streamId) ?? null);
        after = this.d.playLog?.change({ ...fieldsOf(value), accountId: row.account_id, streamId, broadcastId, fallback }, atMs);
        this.d.outbox.record(row.account_id, 'stream.now_playing', { object: this.object({ ...row, now_playing: json }) });
      });
      after?.();
    });
  }

  /**
   * Nothing known plays now (a new source connected without a title): `nowPlaying` becomes null,
   * the running track of the play log ends, and `stream.now_playing` tells it — when a title was set.
   */
  private clearNowPlaying(streamId: string): void {
    const atMs = this.now();
    this.d.writes.run(streamId, 'now playing cleared', () => {
      this.d.playLog?.settle();
      let after: (() => void) | undefined;
      this.transact(() => {
        const row = this.d.streams.getAny(streamId);
        if (!row || !row.now_playing) return;
        this.d.streams.setNowPlaying(streamId, null);
        after = this.d.playLog?.end(streamId, atMs);
        this.d.outbox.record(row.account_id, 'stream.now_playing', { object: this.object({ ...row, now_playing: null }) });
      });
      after?.();
    });
  }

  /**
   * A broadcast's recording finished: it becomes that broadcast's own draft episode, with the
   * chapters of the tracks that played during it, and the broadcast's `episodeId`. The broadcast
   * is the first of the stream that started at or after the recording (a recording an earlier run
   * left and this one finished stays with the broadcast it was made in). Once per broadcast.
   * @throws what the episode side threw (the caller keeps the file)
   */
  async onRecording(streamId: string, recording: Recording): Promise<void> {
    const row = this.d.streams.getAny(streamId);
    const target = row ? recordingOf(row.recording) : null;
    if (!row || !target || !this.d.onRecording) {
      this.d.log.info('recording discarded: the stream no longer records into a podcast', { streamId });
      return;
    }
    const b = this.d.broadcasts?.forRecording(streamId, recording.startedAt ?? 0);
    if (b ? b.episode_id !== null : this.d.hasRecordingEpisode?.(streamId)) {
      this.d.log.info('recording already saved as an episode', { streamId, broadcastId: b?.id });
      return;
    }
    const from = b?.started_at ?? row.started_at;
    const chapters = from !== null ? (this.d.playLog?.chapters(streamId, from, b?.ended_at ?? null, b?.id ?? null) ?? null) : null;
    // Listen again: an episode published on its own is titled with the broadcast's date in the stream's time zone.
    const title = target.publish === 'auto' && from !== null ? `${row.title} — ${broadcastDate(from, row.time_zone ?? 'UTC')}` : row.title;
    const episode = await this.d.onRecording({ accountId: row.account_id, podcastId: target.podcastId, streamId, title, filePath: recording.path, chapters, publish: target.publish ?? 'draft' });
    const episodeId = (episode as { id?: unknown } | null)?.id;
    if (b && typeof episodeId === 'string') this.d.broadcasts?.setEpisode(b.id, episodeId);
    this.d.log.info(target.publish === 'auto' ? 'recording saved as an episode, published once its audio is final' : 'recording saved as a draft episode', { streamId, podcastId: target.podcastId, broadcastId: b?.id });
  }

  private object(row: StreamRow) {
    return toStreamObject(row, this.d.urls(), this.d.listenerCount(row.id));
  }
}

