/**
 * The per-stream media hub (docs/behaviour.md §3, §9 "HLS"): the layers of the stream's HLS ladder — the
 * ingest passed through, plus the layers an FFmpeg codec process encodes from it — the taps that
 * hear the ingest audio (WebRTC), the recording and the ingest bitrate watch. One hub per live
 * stream; it outlives publisher reconnects (the timeline continues with a discontinuity).
 *
 * A publisher reaches the hub through `attach(connection)`: the hub decides how the connection's
 * audio travels — through JS (`PublishInput.audio`), or natively straight into the passthrough
 * layer's segmenter (`MediaConnection.route`), whose handle never leaves media
 * (docs/decisions.md "Ingest I/O"). Imports no other app folder but native/.
 *
 * Its parts: the ladder's layers and codec process (ladder.ts), the recording (hub-recording.ts),
 * what it exchanges with its owner (hub-types.ts); `MediaRegistry` (registry.ts) opens the hubs.
 */
import type { Layer } from './layer.js';
import type { NowPlayingFields } from './layer-media.js';
import { Ladder, ladderLayers } from './ladder.js';
import type { LadderTranscoder } from './transcoder.js';
import { BitrateMonitor } from './bitrate.js';
import { HubRecording, discardRecording } from './hub-recording.js';
import { readAudioTag, type AudioTag } from './codec.js';
import type { AudioTap, HubError, HubEvents, HubOptions, MediaConnection, PublishInput, RecordingTarget, Timeline } from './hub-types.js';

const NO_ERRORS: HubError[] = [];

/** A publisher sending bad audio would log ~47 lines a second; one line per 5 s says enough. */
const DROP_LOG_EVERY_MS = 5000;
/** Segmenter error codes that end the publish (docs/behaviour.md §13 caps). */
const FATAL_CODES = new Set(['frame_too_large', 'segment_too_large']);

/** The publish attached now. */
interface Publish {
  conn: MediaConnection;
  /** Detached already. */
  gone: boolean;
  live: boolean;
  /** How it is routed: not yet, straight to the segmenter, or that plus frames. */
  routed: 'no' | 'segmenter' | 'frames';
  /** Whether the current route allows merged (lazy) socket reads. */
  merged: boolean;
  bitrate: BitrateMonitor;
  /** `audioBytes()` at the last bitrate sample. */
  bytesSeen: number;
  /** A fatal error was raised for this publish (raised once). */
  failed: boolean;
  /** The stream's fallback audio (docs/streams.md "Fallback"), not a publisher: not recorded, no silence detection. */
  fallback: boolean;
}

export class StreamHub {
  ended = false;
  /** The ladder's layers, top (passthrough) first. */
  readonly layers: Layer[];
  /** The last audio sequence header pushed (AAC AudioSpecificConfig or E-RTMP SequenceStart), copied. */
  audioHeader: Uint8Array | null = null;
  private taps: AudioTap[] = [];
  private publish: Publish | null = null;
  /**
   * A publisher taken off air while its audio is silent and the fallback plays (docs/streams.md
   * "Fallback"): its codec process keeps hearing it (silence detection), its outputs go nowhere.
   */
  private muted: { p: Publish; t: LadderTranscoder | null } | null = null;
  /** The ladder's codec process (of the current publish, and of one that left and drains). */
  private readonly ladder: Ladder;
  private readonly recording: HubRecording;
  private dropLog = { at: 0, suppressed: 0 };
  /** A publisher was attached before (the next one continues the timeline with a discontinuity). */
  private attachedBefore = false;
  /** What plays now, as last set (docs/behaviour.md §11); null before the first change. */
  nowPlaying: NowPlayingFields | null = null;
  /** The latest ingest timestamp of this publish seen here (ms, the publisher's clock), and when (ms, wall clock); null before its first audio. */
  private ingestTs: number | null = null;
  private ingestAt = 0;
  /** A change came before the publish's first audio: the layers get it with that audio. */
  private nowPlayingPending = false;
  private readonly nominalKbps: number;

  constructor(
    readonly streamId: string,
    readonly opts: HubOptions,
    private readonly events: HubEvents = { error: () => {} },
  ) {
    this.nominalKbps = opts.ladder[0]!;
    this.layers = ladderLayers(opts);
    this.ladder = new Ladder(this.layers, {
      streamId,
      opts,
      events,
      mutedTranscoder: () => this.muted?.t ?? null,
      publisherAttached: () => this.publish?.fallback === false,
      reroute: () => this.route(),
      errors: (errors) => this.segmenterErrors(null, errors),
    });
    this.recording = new HubRecording(streamId, opts, events);
    if (opts.recording) this.recording.record(opts.recording);
  }

  /** The passthrough layer (the ingest, not re-encoded). */
  get top(): Layer {
    return this.layers[0]!;
  }

  /** Where this hub's timeline stands (the highest of its layers): a next broadcast continues from it. */
  timeline(): Timeline {
    let sequence = 0;
    let discontinuity = 0;
    for (const l of this.layers) {
      sequence = Math.max(sequence, l.nextSequence);
      discontinuity = Math.max(discontinuity, l.discontinuityNumber);
    }
    return { sequence, discontinuity };
  }

  /** Sum of the layers' versions: changes whenever any playlist would. */
  get version(): number {
    let v = this.ended ? 1 : 0;
    for (const l of this.layers) v += l.version + (l.failed ? 1 : 0);
    return v;
  }

  /**
   * Attaches a publisher: a current one is detached first; a timeline that ran before continues
   * with a discontinuity; the ladder's codec process starts. Audio travels through the returned
   * input until `input.live()`, then natively where nothing in JS needs every frame.
   */
  attach(conn: MediaConnection, as: { fallback?: boolean } = {}): PublishInput {
    if (this.publish) this.detach(this.publish);
    this.dropMuted();
    // The last publish's codec process may still be draining: its tail is dropped and the
    // encoded layers' open segments close now, before the new timeline starts.
    this.ladder.cutDrain();
    if (this.attachedBefore) this.discontinuity();
    this.attachedBefore = true;
    this.ingestTs = null; // a new publisher's clock
    const fallback = as.fallback === true;
    const p: Publish = { conn, gone: false, live: false, routed: 'no', merged: false, bitrate: new BitrateMonitor({ nominalKbps: this.nominalKbps }), bytesSeen: 0, failed: false, fallback };
    this.publish = p;
    this.ladder.restart(fallback ? null : (this.opts.silenceSeconds?.() ?? null));
    return {
      audio: (ts, data, tag, segmented) => {
        if (this.publish === p) this.take(p, ts, data, tag, segmented);
        else if (this.muted?.p === p) this.muted.t?.push(ts, data, tag);
      },
      live: () => {
        if (this.publish !== p || p.live) return;
        p.live = true;
        this.route();
      },
      detach: () => {
        if (this.publish === p) this.detach(p);
        else if (this.muted?.p === p) this.dropMuted();
      },
    };
  }

  /**
   * The publisher's audio went silent (docs/streams.md "Fallback"): it goes off air — its audio
   * comes back through JS (no native route) and only its codec process hears it, for silence
   * detection — and `conn` (the fallback audio) is attached in its place, after a discontinuity.
   * Without an attached publisher this is `attach(conn, { fallback: true })`.
   */
  muteFor(conn: MediaConnection): PublishInput {
    const p = this.publish;
    if (p && !p.fallback && !this.muted) {
      this.publish = null;
      this.muted = { p, t: this.ladder.transcoder };
      this.ladder.transcoder = null;
      p.conn.route(null, false, false);
      p.routed = 'no';
      p.merged = false;
      this.ladder.flush('passthrough');
      this.ladder.flush('encoded');
    }
    const m = this.muted;
    this.muted = null; // kept out of attach()'s reach
    const input = this.attach(conn, { fallback: true });
    this.muted = m;
    return input;
  }

  /**
   * Sound returned (docs/streams.md "Fallback"): the muted publisher is on air again after a
   * discontinuity (its codec process kept running), and the fallback audio is dropped. False when
   * no publisher is muted.
   */
  unmute(): boolean {
    const m = this.muted;
    if (!m) return false;
    this.muted = null;
    const f = this.publish;
    if (f) f.gone = true;
    this.publish = null;
    this.ladder.stop();
    this.ladder.flush('passthrough');
    this.ladder.flush('encoded');
    this.discontinuity();
    this.ingestTs = null;
    // The bytes it sent while muted are not a burst: the bitrate watch starts from now.
    m.p.bytesSeen = m.p.conn.audioBytes();
    this.publish = m.p;
    this.ladder.transcoder = m.t;
    this.route();
    return true;
  }

  /** Whether a publisher is muted while the fallback plays. */
  get isMuted(): boolean {
    return this.muted !== null;
  }

  /** Forgets a muted publisher (it left, or another source took over): its codec process stops. */
  private dropMuted(): void {
    const m = this.muted;
    this.muted = null;
    m?.t?.close();
  }

  /** Starts recording a broadcast into `target` (a hub that outlives broadcasts: docs/streams.md "Fallback"); no-op while one records. */
  record(target: RecordingTarget): void {
    if (!this.ended) this.recording.record(target);
  }

  /** The broadcast ended while the hub stays (the fallback plays on): its recording is finished and handed over (`HubEvents.recording`). */
  stopRecording(): void {
    this.recording.stop();
  }

  /** Whether a publisher is attached. */
  get publishing(): boolean {
    return this.publish !== null;
  }

  /** Whether the attached publisher is live (codec checked, first frame in): `skylark_ingest_live` (docs/metrics.md). */
  get ingestLive(): boolean {
    return this.publish?.live === true;
  }

  /** The attached publisher's audio bitrate over the bitrate watch's window (kbps; 0 when nobody publishes): `skylark_ingest_bitrate_kbps`. */
  ingestKbps(nowMs: number): number {
    return this.publish ? this.publish.bitrate.measuredKbps(nowMs) : 0;
  }

  /**
   * How the attached publisher is routed (docs/decisions.md "Ingest I/O"): 'no' (every frame
   * through JS), 'segmenter' (socket → segmenter in C++), 'frames' (that, plus every frame to JS
   * for taps, the ladder or the recording); null when nobody publishes.
   */
  get ingestRoute(): 'no' | 'segmenter' | 'frames' | null {
    return this.publish ? this.publish.routed : null;
  }

  /**
   * Once a second (MediaRegistry's bitrate watch): the attached publisher's audio bytes since the
   * last sample go to its BitrateMonitor (docs/behaviour.md §2 `bitrate_spike`).
   */
  sampleBitrate(nowMs: number): void {
    const p = this.publish;
    if (!p) return;
    const bytes = p.conn.audioBytes();
    const spike = p.bitrate.add(bytes - p.bytesSeen, nowMs);
    p.bytesSeen = bytes;
    if (spike) this.events.error({ code: 'bitrate_spike', message: `Ingest bitrate ${spike.measuredKbps} kbps is over 1.5 × the nominal ${spike.nominalKbps} kbps.`, ...spike });
  }

  /**
   * What plays now changed (docs/behaviour.md §11): kept as `nowPlaying` and, where the layers' segmenter
   * carries timed metadata (`pushMetadata`), handed to every layer at ingest timestamp `atMs` (ms,
   * the publisher's clock) — by default the latest this hub saw, moved on by the wall-clock time
   * since (natively routed audio does not pass through JS). Before the publish's first audio the
   * layers get it with that audio. The same fields as now change nothing.
   */
  setNowPlaying(fields: NowPlayingFields, atMs?: number): void {
    const np = { title: fields.title, artist: fields.artist ?? null, album: fields.album ?? null, url: fields.url ?? null };
    const cur = this.nowPlaying;
    if (cur && cur.title === np.title && cur.artist === np.artist && cur.album === np.album && cur.url === np.url) return;
    this.nowPlaying = np;
    const ts = atMs ?? (this.ingestTs === null ? null : this.ingestTs + Math.max(0, Date.now() - this.ingestAt));
    this.nowPlayingPending = ts === null;
    if (ts !== null) this.pushMetadata(ts);
  }

  /** Feeds one ingest body to the taps and the passthrough layer (tests and tools; publishers use `attach`). */
  pushAudio(timestampMs: number, data: Uint8Array): HubError[] {
    this.sawIngest(timestampMs);
    const tag = readAudioTag(data);
    this.tapAudio(timestampMs, data, tag);
    const errors = this.top.push(timestampMs, data);
    return errors.length === 0 ? NO_ERRORS : errors;
  }

  /** Whether any tap listens (then every ingest frame must reach JS). */
  get tapped(): boolean {
    return this.taps.length !== 0;
  }

  /** The encoded layers stop (their codec process failed): they leave the multivariant playlist. */
  failEncoded(): void {
    this.ladder.failEncoded();
  }

  /** The stream ended: playlists get EXT-X-ENDLIST; taps hear `end`; the recording is finished. */
  end(): void {
    if (this.ended) return;
    if (this.publish) this.detach(this.publish);
    this.dropMuted();
    this.ended = true;
    this.ladder.end();
    const taps = [...this.taps, ...this.ladder.takeTaps()];
    this.taps = [];
    for (const tap of taps) tap.end();
    this.recording.stop();
  }

  /**
   * Ends a hub whose stream never went live: nothing to keep — its recording (if any) is removed.
   */
  abandon(): void {
    const rec = this.recording.take();
    this.end();
    if (rec) discardRecording(rec);
  }

  /**
   * Stops without ending (server shutdown): the recording's file is closed but kept with its
   * sidecar, to be resumed or finished by the next run; codec processes stop.
   */
  async close(): Promise<void> {
    this.ladder.stop();
    this.dropMuted();
    await this.recording.close();
  }

  /** A layer by URL name. */
  layer(name: string): Layer | undefined {
    for (const l of this.layers) if (l.name === name) return l;
    return undefined;
  }

  /** Layers the multivariant playlist lists: the passthrough once ready, the others unless failed. */
  listed(): Layer[] {
    return this.top.ready ? this.layers.filter((l) => l.o.passthrough || !l.failed) : [];
  }

  /**
   * Subscribes to one layer's audio bodies, as its segmenter gets them: the passthrough layer's are
   * the ingest's (`onAudio`), an encoded layer's come from the ladder's codec process (Enhanced RTMP
   * `Opus` bodies for Opus, classic FLV for AAC/MP3). Returns the unsubscribe function.
   */
  onLayerAudio(layer: Layer, tap: AudioTap): () => void {
    return layer === this.top ? this.onAudio(tap) : this.ladder.tap(layer, tap);
  }

  /** The last audio sequence header of `layer` (AudioSpecificConfig / OpusHead body), or null. */
  layerHeader(layer: Layer): Uint8Array | null {
    return layer === this.top ? this.audioHeader : this.ladder.header(layer);
  }

  /** Subscribes to the ingest audio (costs nothing per push without subscribers). Returns the unsubscribe function. */
  onAudio(tap: AudioTap): () => void {
    this.taps = [...this.taps, tap];
    this.route();
    return () => {
      const before = this.taps.length;
      this.taps = this.taps.filter((t) => t !== tap);
      if (this.taps.length !== before) this.route();
    };
  }

  private take(p: Publish, ts: number, data: Uint8Array, tag: AudioTag, segmented: boolean): void {
    this.sawIngest(ts);
    this.tapAudio(ts, data, tag);
    if (!segmented) {
      const errors = this.top.push(ts, data);
      if (errors.length > 0) this.segmenterErrors(p, errors);
    }
    this.ladder.transcoder?.push(ts, data, tag);
    if (!p.fallback) this.recording.push(data, tag);
  }

  /** An ingest timestamp (ms) passed by: the clock `setNowPlaying` aligns to; a change waiting for audio goes now. */
  private sawIngest(ts: number): void {
    this.ingestTs = ts;
    this.ingestAt = Date.now();
    if (this.nowPlayingPending) {
      this.nowPlayingPending = false;
      this.pushMetadata(ts);
    }
  }

  /** Hands `nowPlaying` to every layer's segmenter that carries timed metadata. */
  private pushMetadata(ts: number): void {
    const np = this.nowPlaying;
    if (!np) return;
    for (const l of this.layers) {
      try {
        l.pushMetadata(ts, np);
      } catch (e) {
        this.opts.log?.warn('now playing not carried by a layer', { streamId: this.streamId, layer: l.name, err: (e as Error).message });
      }
    }
  }

  private tapAudio(ts: number, data: Uint8Array, tag: AudioTag): void {
    if (tag.kind === 'header') this.audioHeader = data.slice();
    if (this.taps.length !== 0) for (const t of this.taps) t.audio(ts, data, tag);
  }

  /**
   * Routes the attached publisher's audio natively into the passthrough segmenter (once live),
   * asking for every frame while something in JS needs them: a tap (WebRTC), the ladder's codec
   * process, the recording.
   */
  private route(): void {
    const p = this.publish;
    if (!p || p.gone || !p.live) return;
    const want = this.tapped || this.ladder.transcoder !== null || this.recording.active ? 'frames' : 'segmenter';
    // Lazy reads delay frames to JS by up to a merge period: not while a WebRTC tap or the
    // ladder's codec process (whose layers' parts would lag) wants them at once.
    const merge = !this.tapped && this.ladder.transcoder === null;
    if (want === p.routed && merge === p.merged) return;
    p.routed = want;
    p.merged = merge;
    const top = this.top;
    p.conn.route(
      {
        segmenter: top.segmenterHandle,
        onEvents: (events) => {
          const errors = top.apply(events);
          if (errors.length > 0) this.segmenterErrors(this.publish === p ? p : null, errors);
        },
      },
      want === 'frames',
      merge,
    );
  }

  private detach(p: Publish): void {
    p.gone = true;
    this.publish = null;
    this.ladder.detach();
  }

  /** A publisher (re)attached to a running timeline: every layer's next segment is a discontinuity. */
  private discontinuity(): void {
    for (const l of this.layers) l.discontinuity();
  }

  /** Caps of docs/behaviour.md §13 end the publish (once); other errors (bad frames) are logged, throttled. */
  private segmenterErrors(p: Publish | null, errors: HubError[]): void {
    const fatal = errors.find((e) => FATAL_CODES.has(e.code));
    if (fatal && p && !p.failed) {
      p.failed = true;
      this.events.error({ code: fatal.code, message: fatal.message, fatal: true });
      return;
    }
    const now = Date.now();
    if (now - this.dropLog.at < DROP_LOG_EVERY_MS) {
      this.dropLog.suppressed += errors.length;
      return;
    }
    const e = errors[0]!;
    this.opts.log?.warn('ingest audio dropped', { streamId: this.streamId, code: e.code, message: e.message, suppressedSinceLast: this.dropLog.suppressed });
    this.dropLog = { at: now, suppressed: errors.length - 1 };
  }
}
