/**
 * Live state of streams (PRODUCT.md §2, §9 "Ingest"): who publishes to which stream, `idle` →
 * `live` on the first audio frame after the sequence header (`stream.started`), the reconnect
 * window after a publisher drops (resume with a discontinuity, no events), `live` → `ended` when it
 * runs out (`stream.ended`), takeover by the newest publisher with a valid key, codec checks.
 */
import type { Database } from '../db/database.js';
import type { StreamRow, StreamsRepo } from '../db/streams-repo.js';
import type { Outbox } from '../events/outbox.js';
import type { Logger } from '../log/logger.js';
import type { HubCodec, MediaRegistry, SegmenterRequest, StreamHub } from '../media/hub.js';
import type { LayerSegmenter, LayerSegmenterEvent } from '../media/layer.js';
import { LadderTranscoder } from '../media/transcoder.js';
import { BitrateMonitor } from '../media/bitrate.js';
import { Recorder, type Recording } from '../media/recorder.js';
import type { PublicUrls } from '../config/config.js';
import { tokenMatches } from '../auth/secrets.js';
import { ladderKbps, nominalKbps, toStreamObject } from './stream-object.js';
import type { LiveControl } from './streams.js';

/**
 * Where a routed publisher's audio goes without a JS call per message (docs/decisions.md "Ingest
 * I/O"): the passthrough layer's segmenter, and who takes what it makes of that audio.
 */
export interface RouteTarget {
  segmenter: LayerSegmenter;
  /** The segmenter's events (parts, segments, errors) of the routed audio. */
  onEvents(events: LayerSegmenterEvent[]): void;
}

/** A connected publisher, as the live side sees it: something it can close and route. */
export interface Publisher {
  /** Closes the publish (and its connection), with `reason` for the log. */
  close(reason: string): void;
  /** Refuses the media after a codec mismatch: onStatus NetStream.Publish.Rejected, then close. */
  reject(code: string, description: string): void;
  /**
   * From the next socket read, audio goes straight into `target.segmenter` (in C++); the sink then
   * hears only sequence headers — or every message when `frames` — with `segmented` true.
   * null: everything back to the sink. `merge`: the socket may be read lazily (merged reads,
   * `SKYLARK_INGEST_MERGE_MS`) while no part or segment is about to close — not while a WebRTC
   * tap or the ladder's codec process wants every frame at once.
   */
  route(target: RouteTarget | null, frames: boolean, merge: boolean): void;
  /** FLV audio body bytes received on this publish so far. */
  audioBytes(): number;
}

/** What a publish may feed once authorized. */
export interface PublishSink {
  /** One FLV AUDIODATA body; `segmented`: the passthrough segmenter has it already (routed). */
  audio(timestampMs: number, data: Uint8Array, segmented: boolean): void;
  /** The publisher stopped (unpublish, socket closed or failed). */
  end(): void;
}

/** The answer to a publish request. */
export type PublishDecision =
  | { ok: true; streamId: string }
  | { ok: false; status: 'NetStream.Publish.BadName'; reason: string };

export interface LiveDeps {
  db: Database;
  streams: StreamsRepo;
  outbox: Outbox;
  media: MediaRegistry;
  log: Logger;
  urls: () => PublicUrls;
  createSegmenter: (o: SegmenterRequest) => LayerSegmenter;
  segmentDurationMs: number;
  /** LL-HLS part target for fMP4 layers (ms; 0 = classic HLS only). */
  partTargetMs: number;
  windowSegments: number;
  /** Whether streams get the ladder's encoded layers (false: the passthrough layer only). */
  abrLadder: boolean;
  /** FFmpeg for the ladder's codec process and the recording remux; null = passthrough only. */
  ffmpeg: () => string | null;
  /** Where recordings are written while a stream is live. */
  recordingsDir: string;
  /** A finished recording of a stream with `recording.podcastId` (makes the draft episode). */
  onRecording?: (r: { accountId: string; podcastId: string; streamId: string; title: string; recording: Recording }) => Promise<unknown>;
  now?: () => number;
}

interface Live {
  publisher: Publisher | null;
  /** Which attach the current sink belongs to (a replaced publisher's late end() is ignored). */
  generation: number;
  reconnectTimer: NodeJS.Timeout | null;
  hub: StreamHub;
  codecChecked: boolean;
  /** An audio sequence header arrived on this publish (`live` needs one before a coded frame). */
  sawHeader: boolean;
  /** `live` was triggered for this hub. */
  liveTriggered: boolean;
  /** Dropped-audio log throttle: at most one line per DROP_LOG_EVERY_MS. */
  dropLog: { at: number; suppressed: number };
  /** The ladder's codec process of the current publish (null: none, or it failed). */
  transcoder: LadderTranscoder | null;
  /**
   * The codec process of a publish that has left, emptying its last frames into the encoded layers
   * (their open segments close once it has exited), or null.
   */
  draining: LadderTranscoder | null;
  /** Ingest bitrate watch of the current publish, fed once a second from `Publisher.audioBytes`. */
  bitrate: BitrateMonitor;
  /** `audioBytes()` of the current publisher at the last bitrate sample. */
  bytesSeen: number;
  /** How the current publisher is routed: not yet, straight to the segmenter, or that plus frames. */
  routed: 'no' | 'segmenter' | 'frames';
  /** Whether the current route allows merged (lazy) socket reads. */
  merged: boolean;
  /** The stream's recording (kept across reconnects), or null. */
  recorder: Promise<Recorder | null> | null;
}

/** How often the ingest bitrate watch samples each publisher's byte count (ms). */
const BITRATE_SAMPLE_MS = 1000;

/** A publisher sending bad audio would log ~47 lines a second; one line per 5 s says enough. */
const DROP_LOG_EVERY_MS = 5000;

/** How long an ended stream's playlist (with EXT-X-ENDLIST) stays served (ms). */
const ENDED_HLS_RETENTION_MS = 5 * 60_000;

/** The longest wait for a closed codec process to hand over its last frames (it is killed after 2 s). */
const DRAIN_TIMEOUT_MS = 3000;

/** Resolves when `t` has exited and its outputs were read, or after DRAIN_TIMEOUT_MS. */
function drained(t: LadderTranscoder): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, DRAIN_TIMEOUT_MS);
    timer.unref();
    void t.exited.then(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/**
 * What an FLV AUDIODATA body carries: a sequence header (AAC packet type 0, E-RTMP SequenceStart),
 * a coded frame (AAC raw, E-RTMP CodedFrames, classic MP3), or something else (SequenceEnd, …).
 */
export function audioFrameKind(d: Uint8Array): 'header' | 'frame' | 'other' {
  if (d.length < 2) return 'other';
  const format = d[0]! >> 4;
  if (format === 10) return d[1] === 0 ? 'header' : 'frame';
  if (format === 2 || format === 14) return 'frame';
  if (format === 9) {
    if (d.length < 5) return 'other';
    const packetType = d[0]! & 0x0f;
    if (packetType === 0) return 'header';
    return packetType === 1 && d.length > 5 ? 'frame' : 'other';
  }
  return 'other';
}

/** FLV SoundFormat / E-RTMP FourCC → the stream codec it is (FLV spec E.4.2.1; Enhanced RTMP v2). */
export function audioCodecOf(d: Uint8Array): string {
  if (d.length === 0) return 'unknown';
  const format = d[0]! >> 4;
  if (format === 10) return 'aac';
  if (format === 2 || format === 14) return 'mp3';
  if (format === 9 && d.length >= 5) {
    const fourCc = String.fromCharCode(d[1]!, d[2]!, d[3]!, d[4]!);
    if (fourCc === 'Opus') return 'opus';
    if (fourCc === '.mp3') return 'mp3';
    if (fourCc === 'mp4a') return 'aac';
    return fourCc;
  }
  return ['pcm', 'adpcm', 'mp3', 'pcm_le', 'nellymoser16', 'nellymoser8', 'nellymoser', 'g711a', 'g711u', 'exheader', 'aac', 'speex'][format] ?? `format${format}`;
}

export class LiveService implements LiveControl {
  private readonly live = new Map<string, Live>();
  private readonly now: () => number;
  private generations = 0;

  constructor(private readonly d: LiveDeps) {
    this.now = d.now ?? Date.now;
  }

  /**
   * Checks a publish: the RTMP app must be `live/<stream_id>` and the stream name its key; the
   * stream must not have ended. Never logs the key.
   */
  authorize(app: string, streamName: string): PublishDecision {
    const m = /^live\/(stm_[A-Za-z0-9]+)\/?$/.exec(app);
    if (!m) return { ok: false, status: 'NetStream.Publish.BadName', reason: `unknown application '${app.slice(0, 80)}'` };
    const row = this.d.streams.getAny(m[1]!);
    if (!row) return { ok: false, status: 'NetStream.Publish.BadName', reason: `unknown stream ${m[1]}` };
    const key = streamName.split('?')[0]!;
    if (!tokenMatches(key, row.stream_key_hash)) return { ok: false, status: 'NetStream.Publish.BadName', reason: `wrong stream key for ${row.id}` };
    if (row.status === 'ended') return { ok: false, status: 'NetStream.Publish.BadName', reason: `stream ${row.id} has ended` };
    return { ok: true, streamId: row.id };
  }

  /**
   * Attaches an authorized publisher. The newest publisher wins: a current one is closed. A
   * stream still live (reconnect window or takeover) resumes its timeline with a discontinuity.
   */
  attach(streamId: string, publisher: Publisher): PublishSink {
    const row = this.d.streams.getAny(streamId);
    if (!row) throw new Error(`stream ${streamId} vanished`);
    let state = this.live.get(streamId);
    if (state) {
      if (state.reconnectTimer) clearTimeout(state.reconnectTimer);
      state.reconnectTimer = null;
      const old = state.publisher;
      state.publisher = null;
      if (old) {
        this.d.log.info('publisher replaced by a newer one', { streamId });
        old.close('replaced by a newer publisher');
      }
      if (state.hub.ended) state = undefined; // ended hub lingering for players: start fresh
      else {
        // The last publish's codec process may still be draining: its tail is dropped and the
        // encoded layers' open segments close now, before the new timeline starts.
        if (state.draining) {
          state.draining = null;
          state.hub.flush('encoded');
        }
        state.hub.discontinuity();
      }
    }
    if (!state) {
      this.d.media.delete(streamId);
      const hub = this.d.media.open(streamId, {
        codec: row.codec as HubCodec,
        targetDurationMs: this.d.segmentDurationMs,
        partTargetMs: this.d.partTargetMs,
        windowSegments: this.d.windowSegments,
        ladder: this.d.abrLadder ? ladderKbps(row.quality, row.codec) : [nominalKbps(row.quality, row.codec)],
        createSegmenter: this.d.createSegmenter,
      });
      state = {
        publisher: null,
        generation: 0,
        reconnectTimer: null,
        hub,
        codecChecked: false,
        sawHeader: false,
        liveTriggered: false,
        dropLog: { at: 0, suppressed: 0 },
        transcoder: null,
        draining: null,
        bitrate: new BitrateMonitor({ nominalKbps: nominalKbps(row.quality, row.codec) }),
        bytesSeen: 0,
        routed: 'no',
        merged: false,
        recorder: row.recording ? this.openRecorder(row) : null,
      };
      this.live.set(streamId, state);
    }
    const generation = ++this.generations;
    state.publisher = publisher;
    state.generation = generation;
    state.codecChecked = false;
    state.sawHeader = false;
    state.bitrate = new BitrateMonitor({ nominalKbps: nominalKbps(row.quality, row.codec) });
    state.bytesSeen = 0;
    state.routed = 'no';
    state.merged = false;
    state.transcoder?.close();
    state.transcoder = this.startLadder(streamId, state, row.codec as HubCodec);
    const s = state;
    const codec = row.codec;
    s.hub.onTapsChanged = () => this.route(s);
    this.startBitrateWatch();
    return {
      audio: (ts, data, segmented) => {
        if (s.generation !== generation) return;
        if (!s.codecChecked) {
          const received = audioCodecOf(data);
          if (received !== codec) return this.codecMismatch(streamId, s, codec, received);
          s.codecChecked = true;
        }
        // PRODUCT.md §9: live on the first coded frame after a sequence header, whatever the
        // segmenter makes of it (WebRTC forwards Opus the HLS segmenter may not take yet).
        if (!s.liveTriggered) {
          const kind = audioFrameKind(data);
          if (kind === 'header') s.sawHeader = true;
          else if (kind === 'frame' && (s.sawHeader || codec === 'mp3')) {
            s.liveTriggered = true;
            this.markLive(streamId);
          }
        }
        if (segmented) s.hub.tapAudio(ts, data);
        else {
          const errors = s.hub.pushAudio(ts, data);
          if (errors.length > 0) this.logDropped(streamId, s, errors[0]!, errors.length);
        }
        s.transcoder?.push(ts, data);
        if (s.recorder) void s.recorder.then((r) => r?.push(data));
        // Codec checked and live: from the next read the passthrough segmenter is fed natively.
        if (s.routed === 'no' && s.codecChecked && s.liveTriggered) this.route(s);
      },
      end: () => {
        if (s.generation !== generation || s.publisher === null) return;
        s.publisher = null;
        this.publisherGone(streamId, s);
      },
    };
  }

  /**
   * Routes the current publisher's audio natively into the passthrough segmenter (once its codec
   * is checked and the stream is live), asking for every frame while something in JS needs them:
   * a tap (WebRTC), the ladder's codec process, the recording.
   */
  private route(s: Live): void {
    const p = s.publisher;
    if (!p || s.routed === 'no' && !(s.codecChecked && s.liveTriggered)) return;
    const want = s.hub.tapped || s.transcoder !== null || s.recorder !== null ? 'frames' : 'segmenter';
    // Lazy reads delay frames to JS by up to a merge period: not while a WebRTC tap or the
    // ladder's codec process (whose layers' parts would lag) wants them at once.
    const merge = !s.hub.tapped && s.transcoder === null;
    if (want === s.routed && merge === s.merged) return;
    s.routed = want;
    s.merged = merge;
    const hub = s.hub;
    const streamId = hub.streamId;
    p.route(
      {
        segmenter: hub.top.segmenterHandle,
        onEvents: (events) => {
          const errors = hub.top.apply(events);
          if (errors.length > 0) this.logDropped(streamId, s, errors[0]!, errors.length);
        },
      },
      want === 'frames',
      merge,
    );
  }

  private bitrateTimer: NodeJS.Timeout | null = null;

  /**
   * Once a second while anyone publishes: each publisher's audio bytes since the last sample go
   * to its BitrateMonitor (PRODUCT.md §2 `bitrate_spike`). Stops when nobody publishes.
   */
  private startBitrateWatch(): void {
    if (this.bitrateTimer) return;
    this.bitrateTimer = setInterval(() => {
      const now = this.now();
      let publishing = 0;
      for (const [streamId, s] of this.live) {
        if (!s.publisher) continue;
        publishing++;
        const bytes = s.publisher.audioBytes();
        const spike = s.bitrate.add(bytes - s.bytesSeen, now);
        s.bytesSeen = bytes;
        if (spike) this.streamError(streamId, { code: 'bitrate_spike', message: `Ingest bitrate ${spike.measuredKbps} kbps is over 1.5 × the nominal ${spike.nominalKbps} kbps.`, ...spike });
      }
      if (publishing === 0 && this.bitrateTimer) {
        clearInterval(this.bitrateTimer);
        this.bitrateTimer = null;
      }
    }, BITRATE_SAMPLE_MS);
    this.bitrateTimer.unref();
  }

  /**
   * How the stream's current publisher is routed (docs/decisions.md "Ingest I/O"): 'no' (every
   * frame through JS: codec not checked or not live yet), 'segmenter' (socket → segmenter in C++),
   * 'frames' (that, plus every frame to JS for taps, the ladder or the recording); null when
   * nobody publishes. For diagnostics and tests.
   */
  ingestRoute(streamId: string): 'no' | 'segmenter' | 'frames' | null {
    const s = this.live.get(streamId);
    return s?.publisher ? s.routed : null;
  }

  private counter: (streamId: string) => number = () => 0;

  /** Live listeners of a stream: HLS sessions and WebRTC peers (PRODUCT.md §4). */
  listenerCount(streamId: string): number {
    return this.counter(streamId);
  }

  /** Installs the live listener count (the listener registry, wired by the listeners feature). */
  setListenerCounter(fn: (streamId: string) => number): void {
    this.counter = fn;
  }

  /** Ends a live stream at once (DELETE): publisher closed, `stream.ended`. */
  endNow(streamId: string): void {
    const s = this.live.get(streamId);
    if (s?.publisher) {
      const p = s.publisher;
      s.publisher = null;
      p.close('stream deleted');
    }
    this.end(streamId);
  }

  /** Closes the current publisher (stream key reset); the reconnect window applies. */
  disconnectPublisher(streamId: string): void {
    const s = this.live.get(streamId);
    if (!s?.publisher) return;
    const p = s.publisher;
    s.publisher = null;
    p.close('stream key reset');
    this.publisherGone(streamId, s);
  }

  /** After a restart no publisher is connected: streams left `live` end after their window. */
  recover(): void {
    for (const row of this.d.streams.allLive()) {
      const timer = setTimeout(() => this.endIfUnpublished(row.id), row.reconnect_window * 1000);
      timer.unref();
    }
  }

  /**
   * Stops every timer and every codec process (server shutdown: the RTMP listener closes its
   * connections without telling anyone, and a codec process left running keeps the process alive).
   */
  close(): void {
    for (const s of this.live.values()) {
      if (s.reconnectTimer) clearTimeout(s.reconnectTimer);
      s.transcoder?.close();
      s.draining?.close();
    }
    if (this.bitrateTimer) clearInterval(this.bitrateTimer);
    this.bitrateTimer = null;
  }

  private endIfUnpublished(streamId: string): void {
    if (this.live.get(streamId)?.publisher) return;
    this.end(streamId);
  }

  private publisherGone(streamId: string, s: Live): void {
    const t = s.transcoder;
    s.transcoder = null;
    s.hub.flush('passthrough');
    if (t) {
      // FFmpeg still holds the last ~100 ms of the encoded layers: let it hand them over before
      // their open segments close (else they would make a short extra segment).
      s.draining = t;
      t.close();
      void drained(t).then(() => {
        if (s.draining !== t) return; // a new publisher or the end took over
        s.draining = null;
        s.hub.flush('encoded');
      });
    } else s.hub.flush('encoded');
    const row = this.d.streams.getAny(streamId);
    if (!row || row.status !== 'live') {
      // Never went live (no audio yet): nothing to resume.
      s.hub.end();
      if (s.recorder) void s.recorder.then((r) => r?.finish(null).catch(() => {}));
      this.live.delete(streamId);
      this.d.media.delete(streamId);
      return;
    }
    if (row.reconnect_window === 0) return this.end(streamId);
    s.reconnectTimer = setTimeout(() => {
      s.reconnectTimer = null;
      if (!s.publisher) this.end(streamId);
    }, row.reconnect_window * 1000);
    s.reconnectTimer.unref();
  }

  private logDropped(streamId: string, s: Live, e: { code: string; message: string }, n: number): void {
    const now = this.now();
    if (now - s.dropLog.at < DROP_LOG_EVERY_MS) {
      s.dropLog.suppressed += n;
      return;
    }
    this.d.log.warn('ingest audio dropped', { streamId, code: e.code, message: e.message, suppressedSinceLast: s.dropLog.suppressed });
    s.dropLog = { at: now, suppressed: n - 1 };
  }

  private markLive(streamId: string): void {
    const at = this.now();
    const moved = this.d.db.transaction(() => {
      if (!this.d.streams.markLive(streamId, at)) return false;
      const row = this.d.streams.getAny(streamId)!;
      this.d.outbox.record(row.account_id, 'stream.started', { object: this.object(row) });
      return true;
    })();
    if (moved) {
      this.d.outbox.flush();
      this.d.log.info('stream live', { streamId });
    }
  }

  private end(streamId: string): void {
    const s = this.live.get(streamId);
    if (s?.reconnectTimer) clearTimeout(s.reconnectTimer);
    const at = this.now();
    const moved = this.d.db.transaction(() => {
      if (!this.d.streams.markEnded(streamId, at)) return false;
      const row = this.d.streams.getAny(streamId)!;
      this.d.outbox.record(row.account_id, 'stream.ended', { object: this.object(row) });
      return true;
    })();
    if (moved) {
      this.d.outbox.flush();
      this.d.log.info('stream ended', { streamId });
    }
    if (s) {
      const t = s.transcoder ?? s.draining;
      s.transcoder = null;
      if (t) {
        // The passthrough layer ends now; the encoded ones once the codec process has drained.
        s.draining = t;
        t.close();
        s.hub.top.end();
        const hub = s.hub;
        void drained(t).then(() => {
          if (s.draining === t) s.draining = null;
          hub.end();
        });
      } else s.hub.end();
      if (s.recorder) this.finishRecording(streamId, s.recorder);
      this.live.delete(streamId);
      const hub = s.hub;
      setTimeout(() => {
        if (this.d.media.get(streamId) === hub) this.d.media.delete(streamId);
      }, ENDED_HLS_RETENTION_MS).unref();
    }
  }

  private codecMismatch(streamId: string, s: Live, expected: string, received: string): void {
    const p = s.publisher;
    s.publisher = null;
    s.generation = -1;
    const row = this.d.streams.getAny(streamId);
    if (row) {
      this.d.db.transaction(() => {
        this.d.outbox.record(row.account_id, 'stream.error', {
          object: this.object(row),
          error: { code: 'codec_mismatch', message: `The stream accepts ${expected} audio but received ${received}.`, expected, received },
        });
      })();
      this.d.outbox.flush();
    }
    this.d.log.warn('codec mismatch: publish rejected', { streamId, expected, received });
    p?.reject('NetStream.Publish.Rejected', `This stream accepts ${expected} audio, not ${received}.`);
    this.publisherGone(streamId, s);
  }

  /** Records `stream.error` with the stream and `error` (PRODUCT.md §9 "Events"). */
  private streamError(streamId: string, error: { code: string; message: string; [k: string]: unknown }): void {
    const row = this.d.streams.getAny(streamId);
    if (!row) return;
    this.d.db.transaction(() => this.d.outbox.record(row.account_id, 'stream.error', { object: this.object(row), error }))();
    this.d.outbox.flush();
    this.d.log.warn('stream error', { streamId, code: error.code });
  }

  /** Starts the ladder's codec process for a publish, or null for a one-layer ladder or no FFmpeg. */
  private startLadder(streamId: string, s: Live, codec: HubCodec): LadderTranscoder | null {
    const encoded = s.hub.layers.filter((l) => !l.o.passthrough && !l.failed).map((l) => l.o.kbps);
    if (encoded.length === 0) return null;
    const fail = (reason: string) => {
      if (s.transcoder !== t) return;
      s.transcoder = null;
      s.hub.failEncoded();
      this.route(s); // no codec process to feed: frames may stay in C++
      this.d.log.error('ladder codec process failed; the passthrough layer keeps serving', { streamId, reason });
      this.streamError(streamId, { code: 'transcoder_failed', message: `The ABR ladder's encoder stopped: ${reason}` });
    };
    const ffmpeg = this.d.ffmpeg();
    if (!ffmpeg) {
      s.hub.failEncoded();
      this.d.log.error('no ffmpeg: the ABR ladder is off; the passthrough layer keeps serving', { streamId });
      this.streamError(streamId, { code: 'transcoder_failed', message: 'FFmpeg was not found, so only the passthrough layer is served.' });
      return null;
    }
    const hub = s.hub;
    const t: LadderTranscoder = new LadderTranscoder({
      ffmpeg,
      codec,
      layers: encoded,
      onAudio: (kbps, ts, body) => {
        if (s.transcoder !== t && s.draining !== t) return; // a replaced publish's late frames
        const errors = hub.pushEncoded(kbps, ts, body);
        if (errors.length > 0) this.logDropped(streamId, s, errors[0]!, errors.length);
      },
      onFailure: (reason) => fail(reason),
    });
    return t;
  }

  /** Opens the recording of a stream that records into a podcast (errors logged; then no recording). */
  private openRecorder(row: StreamRow): Promise<Recorder | null> {
    return Recorder.open(this.d.recordingsDir, `${row.id}-${this.now()}`, row.codec as HubCodec).catch((e: Error) => {
      this.d.log.error('cannot open the recording', { streamId: row.id, err: e.message });
      return null;
    });
  }

  /** Closes a recording and hands it to the podcast side as a draft episode. */
  private finishRecording(streamId: string, pending: Promise<Recorder | null>): void {
    const row = this.d.streams.getAny(streamId);
    void pending
      .then(async (rec) => {
        if (!rec) return;
        const recording = await rec.finish(this.d.ffmpeg());
        const target = row?.recording ? (JSON.parse(row.recording) as { podcastId: string }) : null;
        if (!row || !target || !this.d.onRecording) return;
        await this.d.onRecording({ accountId: row.account_id, podcastId: target.podcastId, streamId, title: row.title, recording });
        this.d.log.info('recording saved as a draft episode', { streamId, podcastId: target.podcastId });
      })
      .catch((e: Error) => this.d.log.error('recording failed', { streamId, err: e.message }));
  }

  private object(row: StreamRow) {
    return toStreamObject(row, this.d.urls(), this.listenerCount(row.id));
  }
}
