/**
 * One Opus packet source per stream, fanned out to every WebRTC peer of it (docs/behaviour.md §3):
 * - Opus streams: the Opus packets are the ingest's E-RTMP `Opus` CodedFrames bodies (after the
 *   5-byte ExHeader + FourCC), forwarded without re-encoding.
 * - AAC/MP3 streams: ONE shared FFmpeg codec process (src/delivery/webrtc/transcoder.ts) started with the
 *   first peer and stopped after the last leaves or the stream ends.
 * One sequence of packets: RTP sequence numbers (16 bit) and timestamps (48 kHz, advanced by each
 * packet's TOC duration, RFC 7587 §4.1) are the source's; each peer's sender applies its own SSRC.
 * Each peer has a bounded queue (see `Peer`); the source never waits for one.
 */
import { randomInt } from 'node:crypto';
import type { StreamHub } from '../../live/media/hub.js';
import type { AudioTap } from '../../live/media/hub-types.js';
import { readAudioTag, type AudioTag } from '../../live/media/codec.js';
import type { Logger } from '../../base/logger.js';
import { adtsFrame, parseAsc, ADTS_MAX_PAYLOAD_BYTES, type AdtsConfig } from '../../live/media/adts.js';
import { opusPacketSamples } from '../../live/media/ogg.js';
import { OpusTranscoder } from './transcoder.js';

/** A receiver of the stream's Opus packets (a WebRTC peer). */
export interface PacketSink {
  /** One packet: RTP sequence number, RTP timestamp (48 kHz), Opus payload (shared: never modify). */
  send(seq: number, timestamp: number, payload: Buffer, marker: boolean): void;
  /** The source ended (stream ended): close the peer. */
  close(reason: string): void;
}

/** How long after a codec-process failure it is restarted (ms), while peers remain. */
const RESTART_AFTER_MS = 1000;

export class StreamAudioSource implements AudioTap {
  readonly sinks = new Set<PacketSink>();
  private seq = randomInt(0, 0x10000);
  private ts = randomInt(0, 0x100000000);
  private first = true;
  private unsubscribe: (() => void) | null = null;
  private transcoder: OpusTranscoder | null = null;
  private asc: AdtsConfig | null = null;
  private restartTimer: NodeJS.Timeout | null = null;
  private ended = false;
  private stopped = false;
  /** Packets handed to sinks (each counted once per sink). */
  sent = 0;
  /** AAC frames too large for ADTS (over 8184 bytes), not handed to the codec process. */
  droppedFrames = 0;

  /**
   * @param codec the stream's ingest codec (`opus`, `aac`, `mp3`)
   * @param onIdle called when the last sink left or the stream ended (the owner forgets the source)
   */
  constructor(readonly streamId: string, private readonly hub: StreamHub, readonly codec: string, private readonly log: Logger, private readonly onIdle: () => void) {}

  /** Adds a peer; the first one subscribes to the hub (and starts the codec process). */
  add(sink: PacketSink): void {
    if (this.ended || this.stopped) return sink.close('stream ended');
    this.sinks.add(sink);
    if (this.sinks.size === 1 && !this.unsubscribe) this.start();
  }

  /** Removes a peer; after the last one the hub tap and the codec process stop. */
  remove(sink: PacketSink): void {
    if (!this.sinks.delete(sink)) return;
    if (this.sinks.size === 0) this.stop();
  }

  audio(_timestampMs: number, _data: Uint8Array, tag: AudioTag): void {
    if (tag.codec === 'aac') {
      if (tag.kind === 'header') this.asc = parseAsc(tag.payload);
      else if (tag.kind === 'frame' && this.asc && this.transcoder) {
        if (tag.payload.length > ADTS_MAX_PAYLOAD_BYTES) {
          if (this.droppedFrames++ === 0) this.log.warn('AAC frame too large for ADTS; dropped (logged once per source)', { streamId: this.streamId, bytes: tag.payload.length });
          return;
        }
        this.transcoder.write(adtsFrame(this.asc, tag.payload));
      }
      return;
    }
    if (tag.kind !== 'frame') return; // SequenceStart (OpusHead: nothing to forward), SequenceEnd, …
    if (tag.codec === 'opus') this.emit(Buffer.from(tag.payload));
    else if (tag.codec === 'mp3') this.transcoder?.write(tag.payload);
  }

  /** The stream ended: every peer is closed. */
  end(): void {
    this.ended = true;
    this.unsubscribe = null; // the hub dropped its taps
    for (const s of [...this.sinks]) s.close('stream ended');
    this.sinks.clear();
    this.stop();
  }

  private start(): void {
    this.unsubscribe = this.hub.onAudio(this);
    const header = this.hub.audioHeader;
    if (header) this.audio(0, header, readAudioTag(header));
    if (this.codec !== 'opus') this.startTranscoder();
  }

  private startTranscoder(): void {
    const format = this.codec === 'mp3' ? 'mp3' : 'aac';
    const t = new OpusTranscoder(format, {
      packet: (p) => this.emit(p),
      exit: (error) => {
        if (this.transcoder !== t) return;
        this.transcoder = null;
        if (error === null || this.sinks.size === 0) return;
        this.log.warn('codec process failed; restarting', { streamId: this.streamId, error });
        this.restartTimer = setTimeout(() => {
          this.restartTimer = null;
          if (this.sinks.size > 0 && !this.ended && !this.transcoder) this.startTranscoder();
        }, RESTART_AFTER_MS);
        this.restartTimer.unref();
      },
    });
    this.transcoder = t;
    this.log.debug('codec process started', { streamId: this.streamId, format });
  }

  private stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.unsubscribe?.();
    this.unsubscribe = null;
    if (this.restartTimer) clearTimeout(this.restartTimer);
    this.restartTimer = null;
    const t = this.transcoder;
    this.transcoder = null;
    t?.stop();
    this.onIdle();
  }

  /** Whether the codec process runs (tests, stats). */
  get transcoding(): boolean {
    return this.transcoder !== null;
  }

  private emit(p: Buffer): void {
    const samples = opusPacketSamples(p);
    if (samples === 0) return;
    this.seq = (this.seq + 1) & 0xffff;
    const marker = this.first;
    this.first = false;
    for (const s of this.sinks) s.send(this.seq, this.ts, p, marker);
    this.sent += this.sinks.size;
    this.ts = (this.ts + samples) >>> 0;
  }
}
