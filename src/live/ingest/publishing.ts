/**
 * Who publishes to which stream, whatever the protocol (docs/behaviour.md §2, §9 "Ingest", §10): a
 * granted publish is attached to the stream's media hub; the first coded audio frame after a
 * sequence header makes the stream `live`; when the publisher drops, the stream stays live for its
 * reconnect window and a publisher that comes back resumes the same timeline (with a
 * discontinuity, no events); after the window the broadcast ends and the stream is `idle`, ready to
 * go live again with the same key (docs/streams.md); the next broadcast continues the same HLS
 * timeline after a discontinuity (media/registry.ts `MediaRegistry`). The newest publisher with a valid
 * key wins at once. Audio of another codec is refused (`codec_mismatch`); the caps of docs/behaviour.md
 * §13 end a publish (`frame_too_large`, `segment_too_large`).
 *
 * Protocol servers (RTMP today) hand each publish here as a `Publisher`; the stream lifecycle is
 * reached through the `IngestPort` only.
 *
 * A stream with a fallback (docs/streams.md "Fallback") is never off air: ./fallback-switch.ts
 * plays it while no publisher's audio is on air and keeps the stream's `source`. Every source's
 * title passes `nowPlaying` and its one cap (docs/listeners.md "Title changes").
 */
import type { Logger } from '../../base/logger.js';
import type { Limits } from '../../base/limits/limits.js';
import { TitleCap } from '../../base/limits/title-cap.js';
import type { MediaError, PublishInput } from '../media/hub-types.js';
import type { MediaRegistry } from '../media/registry.js';
import { readAudioTag, type AudioCodec } from '../media/codec.js';
import { Recorder, type Recording, type RecordingLeftover } from '../media/recorder.js';
import type { IngestPort, NowPlaying, PublishGrant } from './port.js';
import { FallbackSwitch } from './fallback-switch.js';
import { sameSettings, type Publisher, type PublishingOptions, type PublishSink, type PublishVouch, type StreamIngest } from './publish-entry.js';

export interface PublishingDeps {
  port: IngestPort;
  media: MediaRegistry;
  log: Logger;
  limits: Limits;
  options: PublishingOptions;
  now?: () => number;
}

export class Publishing {
  private readonly streams = new Map<string, StreamIngest>();
  private readonly now: () => number;
  private generations = 0;
  /** Streams live after a restart whose recording an earlier run left, to resume on reconnect. */
  private readonly resumable = new Map<string, RecordingLeftover>();
  /** Restart timers of streams left live (ended if nobody publishes within their window). */
  private readonly recoverTimers = new Set<NodeJS.Timeout>();
  /** Plays and stops the streams' fallbacks, and keeps each stream's `source`. */
  private readonly fallbacks: FallbackSwitch;

  /** Every source's title changes pass here once (docs/listeners.md "Title changes"): to the hub's layers and the port. */
  private readonly titles: TitleCap<NowPlaying>;

  constructor(private readonly d: PublishingDeps) {
    this.now = d.now ?? Date.now;
    this.titles = new TitleCap<NowPlaying>({
      minIntervalMs: d.options.nowPlayingMinIntervalMs ?? 0,
      apply: (streamId, np) => {
        this.streams.get(streamId)?.hub.setNowPlaying({ title: np.title, artist: np.artist ?? null, album: np.album ?? null, url: np.url ?? null });
        this.d.port.onMetadata(streamId, np);
      },
    });
    this.fallbacks = new FallbackSwitch({
      streams: this.streams,
      port: d.port,
      media: d.media,
      log: d.log,
      options: d.options,
      now: this.now,
      openIngest: (grant, recording) => this.openIngest(grant, recording),
      retire: (streamId, s) => this.retire(streamId, s),
      nowPlaying: (streamId, np) => this.nowPlaying(streamId, np),
      offerTitle: (streamId, np) => this.titles.offer(streamId, np),
    });
  }

  /**
   * A publish request: `streamId` and `key` as the protocol carried them (or a `PublishVouch`: a
   * WHIP publish token verified for this stream, docs/behaviour.md "Go live over WHIP"), from `publisher`.
   * Granted: the publisher is attached (a current one is closed: the newest wins) and gets the
   * sink to feed, with the stream's codec and top bitrate (kbps). Refused: the reason for the log (the caller answers its protocol's refusal).
   */
  publish(streamId: string, key: string | PublishVouch, publisher: Publisher): { ok: true; sink: PublishSink; codec: AudioCodec; kbps: number } | { ok: false; reason: string } {
    const d =
      typeof key === 'string'
        ? this.d.port.authorizePublish(streamId, key)
        : (this.d.port.authorizeVouchedPublish?.(streamId) ?? { ok: false as const, reason: 'publish tokens are not taken' });
    if (!d.ok) return d;
    return { ok: true, sink: this.attach(d.grant, publisher), codec: d.grant.codec, kbps: d.grant.ladderKbps[0]! };
  }

  /**
   * What plays now changed (docs/behaviour.md §11) — the one way in for every source: an Icecast
   * metadata call or tags in its stream, an RTMP `onMetaData` `title`, the API. At most once per
   * `nowPlayingMinIntervalMs` per stream (changes sooner coalesce into the newest, applied when the
   * interval has passed, with the `startedAtMs` they were asked at; docs/listeners.md "Title
   * changes"), the stream's media hub carries it in its layers (aligned to the latest ingest
   * audio), and the lifecycle makes it the stream's `nowPlaying`. `null` clears it at once (each
   * new publisher starts so; a change still waiting is dropped). Ignored for a stream that nobody
   * publishes to and that is not live.
   */
  nowPlaying(streamId: string, np: NowPlaying | null): void {
    const s = this.streams.get(streamId);
    if (!s?.publisher && this.d.port.streamState(streamId)?.status !== 'live') return;
    if (s) s.liveTitle = np;
    // While the fallback plays, its episode is what plays: the live title waits for the live audio.
    if (s?.fallback) return;
    // `null` (a new source): the hub forgets the old title (the next one is carried even if equal).
    if (np === null) {
      this.titles.forget(streamId);
      if (s) s.hub.nowPlaying = null;
      return this.d.port.onMetadata(streamId, null);
    }
    this.titles.offer(streamId, { ...np, startedAtMs: np.startedAtMs ?? this.now() });
  }

  /** How the stream's publisher is routed (docs/decisions.md "Ingest I/O"); null when nobody publishes. */
  ingestRoute(streamId: string): 'no' | 'segmenter' | 'frames' | null {
    const s = this.streams.get(streamId);
    return s?.publisher ? s.hub.ingestRoute : null;
  }

  /**
   * The stream's fallback was set, changed or removed, or the stream was deleted: read again
   * through the port (docs/streams.md "Fallback"). While no live audio is on air the fallback plays
   * (from its next episode, the stream's HLS and `/listen` on air from now, also before a first
   * broadcast); removed, it stops, and a stream that is not live goes off air. Live audio on air
   * goes on: the plan is read again when the fallback next plays.
   */
  fallbackChanged(streamId: string): void {
    this.fallbacks.changed(streamId);
  }

  /** What the stream's fallback plays now (diagnostics, tests: docs/streams.md "Fallback"): the episode, from its cached rendition or the live encode; null when none plays. */
  fallbackPlaying(streamId: string): { episodeId: string; from: 'rendition' | 'encode' } | null {
    return this.fallbacks.playing(streamId);
  }

  /** Ends a live stream's broadcast at once (DELETE): publisher closed, `stream.ended`. */
  endNow(streamId: string): void {
    const s = this.streams.get(streamId);
    if (s?.publisher) {
      const p = s.publisher;
      s.publisher = null;
      s.input?.detach();
      p.close('stream deleted');
    }
    this.end(streamId);
  }

  /** Closes the current publisher (stream key reset); the reconnect window applies. */
  disconnectPublisher(streamId: string): void {
    const s = this.streams.get(streamId);
    if (!s?.publisher) return;
    const p = s.publisher;
    s.publisher = null;
    p.close('stream key reset');
    this.publisherGone(streamId, s);
  }

  /**
   * After a restart no publisher is connected: streams left `live` end after their window; a
   * recording an earlier run left is resumed if its stream is still live, else finished now and
   * handed over.
   */
  recover(): void {
    const live = new Map(this.d.port.liveStreams().map((s) => [s.streamId, s]));
    for (const l of Recorder.leftovers(this.d.options.recordingsDir)) {
      if (live.has(l.streamId) && !this.resumable.has(l.streamId)) this.resumable.set(l.streamId, l);
      else void this.handOverLeftover(l);
    }
    for (const s of live.values()) {
      const timer = setTimeout(() => {
        this.recoverTimers.delete(timer);
        if (!this.streams.get(s.streamId)?.publisher) this.end(s.streamId);
      }, s.reconnectWindowS * 1000);
      timer.unref();
      this.recoverTimers.add(timer);
    }
    for (const id of this.d.port.fallbackStreams?.() ?? []) this.fallbacks.played(id);
    this.fallbacks.syncCache();
  }

  /**
   * Server shutdown: timers stop and publishers are closed; recordings are closed but kept (the
   * next run resumes or finishes them); streams stay `live` (the next run gives them their window).
   */
  async close(): Promise<void> {
    this.titles.close();
    for (const t of this.recoverTimers) clearTimeout(t);
    this.recoverTimers.clear();
    for (const s of this.streams.values()) {
      s.fallback?.close();
      s.fallback = null;
      if (s.reconnectTimer) clearTimeout(s.reconnectTimer);
      s.reconnectTimer = null;
      const p = s.publisher;
      s.publisher = null;
      s.generation = -1;
      p?.close('server stopping');
    }
    this.streams.clear();
    await this.d.media.close();
  }

  private attach(grant: PublishGrant, publisher: Publisher): PublishSink {
    const streamId = grant.streamId;
    let s = this.streams.get(streamId);
    if (s) {
      if (s.reconnectTimer) clearTimeout(s.reconnectTimer);
      s.reconnectTimer = null;
      const old = s.publisher;
      s.publisher = null;
      if (old) {
        this.d.log.info('publisher replaced by a newer one', { streamId });
        old.close('replaced by a newer publisher');
        // A replaced publisher muted by a silence must not come back on air with its audio.
        if (s.hub.isMuted) s.input?.detach();
        s.input = null;
      }
      if (s.hub.ended) s = undefined; // an ended hub lingers for players: start fresh
      // The fallback's hub, made with other settings (a PATCH of quality since): a fresh one.
      else if (!s.liveTriggered && !sameSettings(s.grant, grant)) s = this.retire(streamId, s);
    }
    // A hub made here opens its recording itself (once: a recording that could not start is not retried).
    const made = !s;
    s ??= this.openIngest(grant, true);
    const generation = ++this.generations;
    const st = s;
    st.publisher = publisher;
    st.generation = generation;
    st.codecChecked = false;
    st.sawHeader = false;
    st.sawFormat = false;
    // A new broadcast records; the fallback plays on until this publisher's first audio (takeOver).
    if (!made && !st.liveTriggered && grant.recording) st.hub.record(this.recordingTarget(grant));
    st.input = st.fallback ? null : st.hub.attach(publisher);
    // A new source starts with no title (docs/icecast.md): what the previous one played is not
    // what this one plays; its own title (onMetaData, OpusTags, updinfo) comes after this.
    this.nowPlaying(streamId, null);
    const codec = grant.codec;
    return {
      audio: (ts, data, segmented, known) => {
        if (st.generation !== generation) return;
        const tag = known ?? readAudioTag(data);
        if (!st.codecChecked) {
          if (tag.codec !== codec) return this.codecMismatch(streamId, st, codec, tag.codec);
          st.codecChecked = true;
          if (st.input) this.fallbacks.setSource(streamId, st, 'live', 'publisher_connected');
        }
        if (!st.sawFormat || tag.kind === 'header') this.fallbacks.liveFormat(streamId, st, tag);
        const input = st.input ?? this.takeOver(streamId, st, publisher);
        // docs/behaviour.md §9: live on the first coded frame after a sequence header, whatever the
        // segmenter makes of it (WebRTC forwards Opus the HLS segmenter may not take yet).
        let nowLive = false;
        if (!st.liveTriggered) {
          if (tag.kind === 'header') st.sawHeader = true;
          else if (tag.kind === 'frame' && (st.sawHeader || codec === 'mp3')) {
            st.liveTriggered = true;
            nowLive = true;
            this.d.port.onLive(streamId, this.now());
            this.d.log.info('stream live', { streamId });
          }
        }
        input.audio(ts, data, tag, segmented);
        // Codec checked and live: from the next read the passthrough segmenter may be fed natively.
        if (nowLive || (st.liveTriggered && generation === st.generation)) input.live();
      },
      end: () => {
        if (st.generation !== generation || st.publisher === null) return;
        st.publisher = null;
        this.publisherGone(streamId, st);
      },
      fail: (error) => {
        if (st.generation !== generation) return;
        this.d.port.onError(streamId, error);
      },
    };
  }

  /**
   * A publisher's first audio message: it is on air — the fallback stops (docs/streams.md
   * "Fallback", `publisher_connected`) and the publisher is attached to the hub with the title it
   * sent before its audio (or none).
   */
  private takeOver(streamId: string, s: StreamIngest, publisher: Publisher): PublishInput {
    const src = s.fallback;
    s.fallback = null;
    src?.close();
    const input = s.hub.attach(publisher);
    s.input = input;
    this.fallbacks.setSource(streamId, s, 'live', 'publisher_connected');
    // The episode's title goes with the fallback: what the publisher said before its audio, or none.
    if (src) this.nowPlaying(streamId, s.liveTitle);
    return input;
  }

  /** A new ingest entry and hub for the stream (`recording`: a publish's, which records when the stream does). */
  private openIngest(grant: PublishGrant, recording: boolean): StreamIngest {
    const streamId = grant.streamId;
    const hub = this.d.media.open(streamId, this.hubOptions(grant, recording), {
      error: (e) => this.mediaError(streamId, e),
      recording: (r) => void this.handOver(streamId, r),
      silence: (silent) => this.fallbacks.silence(streamId, silent),
      loudness: (reading) => this.d.port.onLoudness?.(streamId, reading),
    });
    const s: StreamIngest = { grant, hub, publisher: null, input: null, generation: 0, reconnectTimer: null, codecChecked: false, sawHeader: false, sawFormat: false, liveTriggered: false, fallback: null, source: null, liveTitle: null };
    this.streams.set(streamId, s);
    return s;
  }

  /** Where a broadcast of the stream records (a recording an earlier run left is resumed). */
  private recordingTarget(grant: PublishGrant) {
    const o = this.d.options;
    const leftover = this.resumable.get(grant.streamId);
    this.resumable.delete(grant.streamId);
    return { dir: o.recordingsDir, name: `${grant.streamId}-${this.now()}`, minFreeBytes: o.minFreeDiskBytes, ...(leftover ? { resume: leftover } : {}) };
  }

  private hubOptions(grant: PublishGrant, recording: boolean) {
    const o = this.d.options;
    return {
      codec: grant.codec,
      targetDurationMs: o.segmentDurationMs,
      // The stream's latency mode (docs/behaviour.md §3): parts only for `low`.
      partTargetMs: grant.latencyMode === 'low' ? o.partTargetMs : 0,
      windowSegments: o.windowSegments,
      ladder: o.abrLadder ? grant.ladderKbps : grant.ladderKbps.slice(0, 1),
      maxFrameBytes: o.maxAudioFrameBytes,
      segmentBytesFactor: o.segmentBytesFactor,
      ffmpeg: o.ffmpeg,
      recording: recording && grant.recording ? this.recordingTarget(grant) : null,
      silenceSeconds: () => this.d.port.fallback?.(grant.streamId)?.plan.silenceSeconds ?? null,
      log: this.d.log,
    };
  }

  private publisherGone(streamId: string, s: StreamIngest): void {
    s.input?.detach();
    s.input = null;
    // The fallback plays at once (docs/streams.md "Fallback"); a silence's fallback plays on.
    const fallback = this.d.port.fallback?.(streamId) ?? null;
    if (!fallback) this.fallbacks.setSource(streamId, s, null, 'publisher_left');
    else if (!s.fallback) this.fallbacks.play(streamId, s, fallback, 'publisher_left');
    const state = this.d.port.streamState(streamId);
    if (!s.liveTriggered && (!state || state.status !== 'live')) {
      if (fallback) return; // the hub stays on air with the fallback
      // Never went live (no audio yet): nothing to resume.
      s.hub.abandon();
      this.streams.delete(streamId);
      this.d.media.delete(streamId);
      return;
    }
    const windowS = state?.reconnectWindowS ?? 0;
    if (windowS === 0 || !state) return this.end(streamId);
    s.reconnectTimer = setTimeout(() => {
      s.reconnectTimer = null;
      if (!s.publisher) this.end(streamId);
    }, windowS * 1000);
    s.reconnectTimer.unref();
  }

  private end(streamId: string): void {
    const s = this.streams.get(streamId);
    if (s?.reconnectTimer) clearTimeout(s.reconnectTimer);
    this.titles.flush(streamId); // a title still waiting for the cap is the last one the stream had
    this.d.port.onEnded(streamId, this.now());
    this.d.log.info('stream ended', { streamId });
    if (s?.fallback && !s.publisher) {
      // The broadcast ended; the stream stays on air with its fallback (docs/streams.md "Fallback").
      s.reconnectTimer = null;
      s.liveTriggered = false;
      s.hub.stopRecording();
    } else if (s) {
      s.fallback?.close();
      this.streams.delete(streamId);
      this.d.media.end(streamId);
    }
    // Ended without a publisher since a restart (none resumed it): the recording it left is finished now.
    const l = this.resumable.get(streamId);
    this.resumable.delete(streamId);
    if (l) void this.handOverLeftover(l);
  }

  /** Ends the stream's hub (made with settings no longer the stream's) and forgets its entry: undefined. */
  private retire(streamId: string, s: StreamIngest): undefined {
    s.fallback?.close();
    s.fallback = null;
    this.streams.delete(streamId);
    this.d.media.end(streamId);
    return undefined;
  }

  private codecMismatch(streamId: string, s: StreamIngest, expected: string, received: string): void {
    const p = s.publisher;
    s.publisher = null;
    s.generation = -1;
    this.d.port.onError(streamId, { code: 'codec_mismatch', message: `The stream accepts ${expected} audio but received ${received}.`, expected, received });
    this.d.log.warn('codec mismatch: publish rejected', { streamId, expected, received });
    p?.reject(`This stream accepts ${expected} audio, not ${received}.`);
    this.publisherGone(streamId, s);
  }

  /** A problem of the stream's media: `stream.error`; a cap of docs/behaviour.md §13 also ends the publish. */
  private mediaError(streamId: string, e: MediaError): void {
    const { fatal, ...error } = e;
    this.d.port.onError(streamId, error);
    if (!fatal) return;
    const s = this.streams.get(streamId);
    const p = s?.publisher;
    if (!s || !p) return;
    this.d.limits.hit(e.code === 'segment_too_large' ? 'segment_bytes' : 'audio_frame_bytes', p.remote, { streamId });
    s.publisher = null;
    s.generation = -1;
    p.close(`${e.code}: ${e.message}`);
    this.publisherGone(streamId, s);
  }

  /** Hands a finished recording over (draft episode), then forgets it on disk. Failures are logged; the files stay. */
  private async handOver(streamId: string, r: Recording): Promise<void> {
    try {
      await this.d.port.onRecording(streamId, r);
      await r.release();
    } catch (e) {
      this.d.log.error('recording not saved as an episode; its file is kept', { streamId, path: r.path, err: (e as Error).message });
    }
  }

  private async handOverLeftover(l: RecordingLeftover): Promise<void> {
    let r: Recording;
    try {
      r = await Recorder.finishLeftover(l, this.d.options.ffmpeg());
    } catch (e) {
      this.d.log.error('a recording left by an earlier run could not be finished', { streamId: l.streamId, err: (e as Error).message });
      return;
    }
    this.d.log.info('recording left by an earlier run finished', { streamId: l.streamId });
    await this.handOver(l.streamId, r);
  }
}
