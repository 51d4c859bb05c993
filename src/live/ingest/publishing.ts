/**
 * Who publishes to which stream, whatever the protocol (docs/behaviour.md §2, §9 "Ingest", §10): a
 * granted publish is attached to the stream's media hub; the first coded audio frame after a
 * sequence header makes the stream `live`; when the publisher drops, the stream stays live for its
 * reconnect window and a publisher that comes back resumes the same timeline (with a
 * discontinuity, no events); after the window the broadcast ends and the stream is `idle`, ready to
 * go live again with the same key (docs/streams.md); the next broadcast continues the same HLS
 * timeline after a discontinuity (media/hub.ts `MediaRegistry`). The newest publisher with a valid
 * key wins at once. Audio of another codec is refused (`codec_mismatch`); the caps of docs/behaviour.md
 * §13 end a publish (`frame_too_large`, `segment_too_large`).
 *
 * Protocol servers (RTMP today) hand each publish here as a `Publisher`; the stream lifecycle is
 * reached through the `IngestPort` only.
 */
import type { Logger } from '../../base/logger.js';
import type { Limits } from '../../base/limits/limits.js';
import { TitleCap } from '../../base/limits/title-cap.js';
import type { MediaConnection, MediaError, MediaRegistry, PublishFeed, StreamHub } from '../media/hub.js';
import { readAudioTag, type AudioTag } from '../media/codec.js';
import { Recorder, type Recording, type RecordingLeftover } from '../media/recorder.js';
import type { IngestPort, NowPlayingUpdate, PublishGrant, StreamError } from './port.js';

/** A connected publisher, as ingest sees it (one per accepted publish, any protocol). */
export interface Publisher extends MediaConnection {
  /** The peer (`ip:port`), for logs and limits. */
  readonly remote: string;
  /** Closes the publish (and its connection), with `reason` for the log. */
  close(reason: string): void;
  /** Refuses the media after a codec mismatch (RTMP: onStatus NetStream.Publish.Rejected), then closes. */
  reject(description: string): void;
}

/** What a granted publish feeds. */
export interface PublishSink {
  /**
   * One audio body (FLV AUDIODATA; RTMP timestamp, ms); `segmented`: the passthrough segmenter
   * has it already (natively routed). `tag`: the body's tag header when the caller read it.
   */
  audio(timestampMs: number, data: Uint8Array, segmented: boolean, tag?: AudioTag): void;
  /** The publisher stopped (unpublish, socket closed or failed). */
  end(): void;
  /** The publish broke a cap of docs/behaviour.md §13 (`frame_too_large`): `stream.error`; the caller then closes it. */
  fail(error: StreamError): void;
}

/** Settings of the media a publish makes. Durations in ms, sizes in bytes. */
export interface PublishingOptions {
  segmentDurationMs: number;
  /** LL-HLS part target for fMP4 layers of `low` latency streams (0 = classic HLS only). */
  partTargetMs: number;
  windowSegments: number;
  /** Whether streams get the ladder's encoded layers (false: the passthrough layer only). */
  abrLadder: boolean;
  /** FFmpeg for the ladder's codec process and the recording remux; null = passthrough only. */
  ffmpeg: () => string | null;
  /** Where recordings are written while a stream is live. */
  recordingsDir: string;
  /** docs/behaviour.md §13 caps. */
  maxAudioFrameBytes: number;
  segmentBytesFactor: number;
  minFreeDiskBytes: number;
  /**
   * Title changes reach the hub's timed metadata (ID3 in every layer, EXT-X-DATERANGE) at most
   * once per this long per stream (ms; 0 = every change), coalesced into the newest exactly as the
   * lifecycle caps `nowPlaying` (docs/listeners.md "Title changes"), so both end on the same title.
   */
  nowPlayingMinIntervalMs?: number;
}

interface StreamIngest {
  grant: PublishGrant;
  hub: StreamHub;
  publisher: Publisher | null;
  feed: PublishFeed | null;
  /** Which attach the current sink belongs to (a replaced publisher's late calls are ignored). */
  generation: number;
  reconnectTimer: NodeJS.Timeout | null;
  codecChecked: boolean;
  /** An audio sequence header arrived on this publish (`live` needs one before a coded frame). */
  sawHeader: boolean;
  /** `live` was triggered for this hub. */
  liveTriggered: boolean;
}

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

  /** The cap on title changes that reach a hub's layers. */
  private readonly hubTitles: TitleCap<NowPlayingUpdate>;

  constructor(private readonly d: PublishingDeps) {
    this.now = d.now ?? Date.now;
    this.hubTitles = new TitleCap<NowPlayingUpdate>({
      minIntervalMs: d.options.nowPlayingMinIntervalMs ?? 0,
      apply: (streamId, np) =>
        this.streams.get(streamId)?.hub.setNowPlaying({ title: np.title, artist: np.artist ?? null, album: np.album ?? null, url: np.url ?? null }),
    });
  }

  /**
   * A publish request: `streamId` and `key` as the protocol carried them, from `publisher`.
   * Granted: the publisher is attached (a current one is closed: the newest wins) and gets the
   * sink to feed. Refused: the reason for the log (the caller answers its protocol's refusal).
   */
  publish(streamId: string, key: string, publisher: Publisher): { ok: true; sink: PublishSink } | { ok: false; reason: string } {
    const d = this.d.port.authorizePublish(streamId, key);
    if (!d.ok) return d;
    return { ok: true, sink: this.attach(d.grant, publisher) };
  }

  /**
   * What plays now changed (docs/behaviour.md §11) — the one way in for every source: an Icecast
   * metadata call or tags in its stream, an RTMP `onMetaData` `title`, the API. The stream's media
   * hub carries it in its layers (aligned to the latest ingest audio), and the lifecycle makes it
   * the stream's `nowPlaying`. `null` clears it (each new publisher starts so). Ignored for a
   * stream that nobody publishes to and that is not live.
   */
  nowPlaying(streamId: string, np: NowPlayingUpdate | null): void {
    const s = this.streams.get(streamId);
    if (!s?.publisher && this.d.port.streamState(streamId)?.status !== 'live') return;
    // `null` (a new source): the hub forgets the old title (the next one is carried even if equal).
    if (np === null) {
      this.hubTitles.forget(streamId);
      if (s) s.hub.nowPlaying = null;
    } else if (s) this.hubTitles.offer(streamId, np);
    this.d.port.onMetadata(streamId, np);
  }

  /** How the stream's publisher is routed (docs/decisions.md "Ingest I/O"); null when nobody publishes. */
  ingestRoute(streamId: string): 'no' | 'segmenter' | 'frames' | null {
    const s = this.streams.get(streamId);
    return s?.publisher ? s.hub.ingestRoute : null;
  }

  /** Ends a live stream's broadcast at once (DELETE): publisher closed, `stream.ended`. */
  endNow(streamId: string): void {
    const s = this.streams.get(streamId);
    if (s?.publisher) {
      const p = s.publisher;
      s.publisher = null;
      s.feed?.detach();
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
  }

  /**
   * Server shutdown: timers stop and publishers are closed; recordings are closed but kept (the
   * next run resumes or finishes them); streams stay `live` (the next run gives them their window).
   */
  async close(): Promise<void> {
    this.hubTitles.close();
    for (const t of this.recoverTimers) clearTimeout(t);
    this.recoverTimers.clear();
    for (const s of this.streams.values()) {
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
      }
      if (s.hub.ended) s = undefined; // an ended hub lingers for players: start fresh
    }
    if (!s) {
      const hub = this.d.media.open(streamId, this.hubOptions(grant), {
        error: (e) => this.mediaError(streamId, e),
        recording: (r) => void this.handOver(streamId, r),
      });
      s = { grant, hub, publisher: null, feed: null, generation: 0, reconnectTimer: null, codecChecked: false, sawHeader: false, liveTriggered: false };
      this.streams.set(streamId, s);
    }
    const generation = ++this.generations;
    const st = s;
    st.publisher = publisher;
    st.generation = generation;
    st.codecChecked = false;
    st.sawHeader = false;
    st.feed = st.hub.attach(publisher);
    // A new source starts with no title (docs/icecast.md): what the previous one played is not
    // what this one plays; its own title (onMetaData, OpusTags, updinfo) comes after this.
    this.nowPlaying(streamId, null);
    const feed = st.feed;
    const codec = grant.codec;
    return {
      audio: (ts, data, segmented, known) => {
        if (st.generation !== generation) return;
        const tag = known ?? readAudioTag(data);
        if (!st.codecChecked) {
          if (tag.codec !== codec) return this.codecMismatch(streamId, st, codec, tag.codec);
          st.codecChecked = true;
        }
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
        feed.audio(ts, data, tag, segmented);
        // Codec checked and live: from the next read the passthrough segmenter may be fed natively.
        if (nowLive || (st.liveTriggered && generation === st.generation)) feed.live();
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

  private hubOptions(grant: PublishGrant) {
    const o = this.d.options;
    const leftover = this.resumable.get(grant.streamId);
    this.resumable.delete(grant.streamId);
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
      recording: grant.recording
        ? { dir: o.recordingsDir, name: `${grant.streamId}-${this.now()}`, minFreeBytes: o.minFreeDiskBytes, ...(leftover ? { resume: leftover } : {}) }
        : null,
      log: this.d.log,
    };
  }

  private publisherGone(streamId: string, s: StreamIngest): void {
    s.feed?.detach();
    s.feed = null;
    const state = this.d.port.streamState(streamId);
    if (!s.liveTriggered && (!state || state.status !== 'live')) {
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
    this.d.port.onEnded(streamId, this.now());
    this.d.log.info('stream ended', { streamId });
    if (s) {
      this.streams.delete(streamId);
      this.d.media.end(streamId);
    } else {
      // Ended without a publisher since a restart: the recording it left is finished now.
      const l = this.resumable.get(streamId);
      this.resumable.delete(streamId);
      if (l) void this.handOverLeftover(l);
    }
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
