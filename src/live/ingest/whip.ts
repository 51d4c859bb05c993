/**
 * The publish side of WHIP (RFC 9725; docs/behaviour.md "Go live over WHIP"): what a WebRTC
 * publisher's Opus RTP becomes once its peer connection is up. The WebRTC side (ICE, DTLS, SRTP,
 * the HTTP resource) is src/delivery/webrtc/whip.ts; it reaches this through the app's wiring only.
 *
 * - A WHIP publish is a publish like RTMP and Icecast (./publishing.ts): the stream key — or a
 *   publish token the WebRTC side verified — is checked, the newest publisher wins whatever its
 *   protocol, and the reconnect window, broadcasts, recording, fallback and every output follow.
 * - The RTP goes through a jitter buffer (./rtp-jitter.ts): in sequence order, timed by the RTP
 *   clock (48 kHz), gaps concealed with Opus PLC frames, so segments keep their durations.
 * - An `opus` stream takes the Opus packets as they are, as Enhanced RTMP `Opus` bodies (an OpusHead
 *   sequence header first). An `aac` or `mp3` stream's top layer is encoded from them by one FFmpeg
 *   per publish (Ogg Opus in, ADTS or MP3 at the top bitrate out), read back by the native Icecast
 *   source parser exactly as the fallback's encode is (./fallback.ts); the ladder encodes the
 *   lower layers from that as for any publisher.
 * - A publish that has sent no RTP for `noRtpMs` (10 s) is closed (docs/behaviour.md §13).
 * - With the native receive (src/native/whip-receive.ts, `nativeSink`), the RTP never reaches this
 *   file: the jitter buffer is the native one, and once the hub routes the publish (`route`, as it
 *   routes an RTMP connection) an `opus` stream's packets go into the layer's segmenter in C++;
 *   until then, and for `aac`/`mp3` streams (the encoder), the ordered packets come here in batches.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import type { Logger } from '../../base/logger.js';
import type { Limits } from '../../base/limits/limits.js';
import { IcecastSource } from '../../native/icecast-source.js';
import { eRtmpOpusBody } from '../media/transcoder.js';
import { OggOpusWriter } from '../media/ogg.js';
import type { AudioCodec } from '../media/codec.js';
import type { IngestPort } from './port.js';
import type { Publishing } from './publishing.js';
import type { PublishSink, Publisher } from './publish-entry.js';
import { OpusJitterBuffer, type JitterStats } from './rtp-jitter.js';
import type { Segmenter, SegmenterEvent } from '../../native/segmenter.js';
import type { WhipNativeFeed, WhipNativeSink } from '../../native/whip-receive.js';

/** How a WHIP publish proves it may publish: the stream key, or a publish token verified already. */
export type WhipCredential = { key: string } | { publishToken: true };

/** Settings of WHIP publishes. Times in ms. */
export interface WhipIngestOptions {
  /** A publish with no RTP for this long is closed. */
  noRtpMs: number;
  /** How long the jitter buffer waits for a missing packet. */
  jitterMs: number;
  /** The top bitrate FFmpeg encodes an `aac`/`mp3` stream at comes from the grant; the encoder's binary: */
  ffmpeg: () => string | null;
  /** Largest Opus packet taken (bytes; docs/behaviour.md §13 `maxAudioFrameBytes`). */
  maxFrameBytes: number;
  /** Merged reads of a natively received publish (ms; `SKYLARK_INGEST_MERGE_MS`, 0 = off). */
  mergeMs?: number;
}

/** Defaults: 10 s without RTP closes a publish; packets wait 60 ms for the ones before them. */
export const WHIP_INGEST_DEFAULTS = { noRtpMs: 10_000, jitterMs: 60 };

/** What the WebRTC side is told about a publish. */
export interface WhipPublishEvents {
  /** The publish ended from this side (replaced by a newer publisher, no RTP, stream deleted, …): close the peer. */
  closed(reason: string): void;
}

/** 19-byte OpusHead (RFC 7845 §5.1): version 1, 2 channels, pre-skip 312, 48 kHz, gain 0, mapping family 0. */
function opusHead(): Buffer {
  const b = Buffer.alloc(19);
  b.write('OpusHead', 0, 'latin1');
  b[8] = 1;
  b[9] = 2;
  b.writeUInt16LE(312, 10);
  b.writeUInt32LE(48000, 12);
  return b;
}

/** FFmpeg's output for a stream codec other than Opus (the byte stream the Icecast parser reads). */
const ENCODE: Record<'aac' | 'mp3', string[]> = {
  aac: ['-c:a', 'aac', '-f', 'adts'],
  mp3: ['-c:a', 'libmp3lame', '-write_xing', '0', '-id3v2_version', '0', '-f', 'mp3'],
};

/** Ingest's WHIP entry: checks and opens publishes. */
export class WhipIngest {
  constructor(
    private readonly d: {
      publishing: Publishing;
      port: Pick<IngestPort, 'authorizePublish' | 'authorizeVouchedPublish' | 'streamState'>;
      log: Logger;
      limits: Limits;
      options: WhipIngestOptions;
    },
  ) {}

  /**
   * Whether `credential` may publish to `streamId` now (nothing is attached): `ok` with the
   * stream's codec, `unknown_stream`, or `refused` (wrong key; the reason is logged, never the key).
   */
  check(streamId: string, credential: WhipCredential): { ok: true; codec: AudioCodec } | { ok: false; why: 'unknown_stream' | 'refused' } {
    if (this.d.port.streamState(streamId) === null) return { ok: false, why: 'unknown_stream' };
    const d = 'key' in credential ? this.d.port.authorizePublish(streamId, credential.key) : (this.d.port.authorizeVouchedPublish?.(streamId) ?? { ok: false as const, reason: 'publish tokens are not taken' });
    if (!d.ok) {
      this.d.log.info('whip publish refused', { streamId, reason: d.reason });
      return { ok: false, why: 'refused' };
    }
    return { ok: true, codec: d.grant.codec };
  }

  /**
   * Starts the publish (its peer connected): it takes the stream over (the newest publisher wins).
   * @returns the publish to feed with RTP, or null when it is refused now (the reason is logged)
   */
  open(streamId: string, credential: WhipCredential, remote: string, events: WhipPublishEvents): WhipPublish | null {
    const p = new WhipPublish(streamId, remote, events, this.d.log, this.d.limits, this.d.options);
    const d = this.d.publishing.publish(streamId, 'key' in credential ? credential.key : { publishToken: true }, p);
    if (!d.ok) {
      this.d.log.info('whip publish refused', { streamId, reason: d.reason });
      return null;
    }
    p.start(d.sink, d.codec, d.kbps);
    this.d.log.info('publish started', { remote, streamId, protocol: 'whip' });
    return p;
  }
}

/** One WHIP publish: the Publisher that ./publishing.ts holds, fed RTP by the WebRTC side. */
export class WhipPublish implements Publisher {
  private sink: PublishSink | null = null;
  private closed = false;
  private bytes = 0;
  private readonly jitter: OpusJitterBuffer;
  private flushTimer: NodeJS.Timeout | null = null;
  private idleTimer: NodeJS.Timeout | null = null;
  private lastRtpAt = Date.now();
  private encoder: OpusEncodeProcess | null = null;
  private headerSent = false;
  private ssrc: number | null = null;
  /** The native receive feeding this publish (null: `rtp` is called per packet). */
  private feed: WhipNativeFeed | null = null;
  private segmenterSink: ((events: SegmenterEvent[]) => void) | null = null;

  constructor(
    private readonly streamId: string,
    readonly remote: string,
    private readonly events: WhipPublishEvents,
    private readonly log: Logger,
    private readonly limits: Limits,
    private readonly o: WhipIngestOptions,
  ) {
    this.jitter = new OpusJitterBuffer({ delayMs: o.jitterMs, maxFillMs: o.noRtpMs, maxPackets: 512, out: (samples, payload) => this.opus(samples, payload) });
  }

  /** Granted: audio goes to `sink`, as Opus (an `opus` stream) or encoded to the stream's codec at `kbps`. */
  start(sink: PublishSink, codec: AudioCodec, kbps: number): void {
    this.sink = sink;
    if (codec !== 'opus') {
      const ffmpeg = this.o.ffmpeg();
      if (!ffmpeg) {
        sink.fail({ code: 'transcoder_failed', message: 'FFmpeg was not found: a WHIP publish to an aac or mp3 stream cannot be encoded.' });
        return this.close('no ffmpeg');
      }
      this.encoder = new OpusEncodeProcess(ffmpeg, codec, kbps, this.o.maxFrameBytes, {
        audio: (ts, body) => this.sink?.audio(ts, body, false),
        failed: (why) => {
          this.log.warn('whip encoder failed', { streamId: this.streamId, why });
          this.sink?.fail({ code: 'transcoder_failed', message: `The encoder of the WHIP publish stopped: ${why}` });
          this.close(`encoder failed: ${why}`);
        },
      });
    }
    this.idleTimer = setInterval(() => {
      const since = this.feed ? (this.feed.counts().msSinceLastRtp ?? Date.now() - this.lastRtpAt) : Date.now() - this.lastRtpAt;
      if (since >= this.o.noRtpMs) {
        this.limits.hit('whip_no_rtp', this.remote, { streamId: this.streamId });
        this.close('no RTP');
      }
    }, Math.min(1000, this.o.noRtpMs));
    this.idleTimer.unref();
  }

  /**
   * One RTP packet's fields (the WebRTC side has decrypted it and checked its payload type): 16-bit
   * sequence number, 32-bit timestamp, payload, and the SSRC (a new one restarts the jitter buffer).
   */
  rtp(seq: number, timestamp: number, payload: Uint8Array, ssrc = 0): void {
    if (this.closed) return;
    if (ssrc !== this.ssrc) {
      if (this.ssrc !== null) this.jitter.restart();
      this.ssrc = ssrc;
    }
    this.lastRtpAt = Date.now();
    if (payload.length > this.o.maxFrameBytes) return;
    this.bytes += payload.length;
    this.jitter.push(seq, timestamp, payload, this.lastRtpAt);
    this.schedule();
  }

  /**
   * The native receive's side of this publish (src/native/whip-receive.ts): the jitter buffer's
   * settings, where ordered packets and segmenter events go; `attach` gives it the receive.
   */
  nativeSink(): WhipNativeSink {
    return {
      options: { jitterMs: this.o.jitterMs, maxFillMs: this.o.noRtpMs, maxPackets: 512, maxFrameBytes: this.o.maxFrameBytes, mergeMs: this.o.mergeMs ?? 0 },
      attach: (feed) => {
        this.feed = feed;
      },
      frames: (positions, payloads, segmented) => {
        if (this.closed) return;
        for (let i = 0; i < positions.length; i++) this.opus(positions[i]!, payloads[i]!, segmented);
      },
      segmenterEvents: (events) => {
        if (!this.closed) this.segmenterSink?.(events);
      },
    };
  }

  /** The jitter buffer's counts (the native one's when the receive is native). */
  stats(): JitterStats {
    const c = this.feed?.counts();
    return c ? { received: c.received, reordered: c.reordered, lost: c.lost, late: c.late, filled: c.filled } : this.jitter.stats;
  }

  /**
   * Publisher (MediaConnection): with the native receive and no encoder, the ordered Opus goes into
   * `target.segmenter` in C++ from now on (and to the hub too when `frames`, flagged segmented);
   * null: back through the hub; `merge`: the socket may be read lazily while no cut is near. Without
   * the native receive every packet goes through the hub.
   */
  route(target: { segmenter: Segmenter; onEvents(events: SegmenterEvent[]): void } | null, frames: boolean, merge: boolean): void {
    if (!this.feed || this.encoder || this.closed) return;
    this.segmenterSink = target ? target.onEvents : null;
    this.feed.route(target ? target.segmenter : null, frames, merge);
  }

  audioBytes(): number {
    return this.feed ? this.feed.counts().bytes : this.bytes;
  }

  /** Publisher: this publish ends (replaced, key reset, stream deleted, …): the peer is told to close. */
  close(reason: string): void {
    if (this.closed) return;
    this.closed = true;
    if (this.flushTimer) clearTimeout(this.flushTimer);
    if (this.idleTimer) clearInterval(this.idleTimer);
    this.flushTimer = this.idleTimer = null;
    this.encoder?.close();
    this.encoder = null;
    this.feed?.route(null, false, false);
    this.feed = null;
    this.segmenterSink = null;
    const s = this.sink;
    this.sink = null;
    s?.end();
    this.log.info('whip publish closed', { streamId: this.streamId, remote: this.remote, reason });
    this.events.closed(reason);
  }

  /** Publisher: the codec was refused (cannot happen: the audio is made in the stream's codec). */
  reject(description: string): void {
    this.close(`refused: ${description}`);
  }

  /** A timer for the jitter buffer's next deadline (a gap waiting on a missing packet). */
  private schedule(): void {
    const at = this.jitter.deadline();
    if (at === null || this.flushTimer) return;
    this.flushTimer = setTimeout(() => {
      this.flushTimer = null;
      if (this.closed) return;
      this.jitter.flush(Date.now());
      this.schedule();
    }, Math.max(1, at - Date.now()));
  }

  /** One Opus packet in order at `samples` (48 kHz) from the first: to the stream, or to the encoder. */
  private opus(samples: number, payload: Uint8Array, segmented = false): void {
    if (this.encoder) return this.encoder.push(payload);
    const sink = this.sink;
    if (!sink) return;
    const ts = Math.round(samples / 48);
    if (!this.headerSent) {
      this.headerSent = true;
      sink.audio(ts, eRtmpOpusBody(0, opusHead()), false);
    }
    this.sink?.audio(ts, eRtmpOpusBody(1, payload), segmented);
  }
}

/**
 * One FFmpeg that encodes a publish's Opus into the stream's codec (`aac` → ADTS, `mp3` → MP3) at
 * `kbps`; what it writes goes through the native Icecast source parser into audio messages.
 */
class OpusEncodeProcess {
  private readonly child: ChildProcess;
  private readonly ogg = new OggOpusWriter();
  private closed = false;
  private stderr = '';

  constructor(ffmpeg: string, codec: 'aac' | 'mp3', kbps: number, maxFrameBytes: number, private readonly to: { audio(ts: number, body: Buffer): void; failed(why: string): void }) {
    const args = ['-hide_banner', '-loglevel', 'error', '-nostdin', '-probesize', '32', '-analyzeduration', '0', '-f', 'ogg', '-i', 'pipe:0', '-ar', '48000', '-ac', '2', ...ENCODE[codec], '-b:a', `${kbps}k`, '-flush_packets', '1', 'pipe:1'];
    this.child = spawn(ffmpeg, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    this.child.stdin!.on('error', () => {});
    this.child.stderr!.on('data', (d: Buffer) => (this.stderr = (this.stderr + d.toString()).slice(-2000)));
    this.child.on('error', (e) => this.fail(`cannot run ffmpeg: ${e.message}`));
    this.child.on('exit', (code, signal) => this.fail(`ffmpeg exited (${signal ?? code}): ${this.stderr.trim().slice(-300)}`));
    const parser = new IcecastSource(codec, { maxFrameBytes: Math.max(1024, maxFrameBytes) });
    const handler = {
      audio: (ts: number, body: Buffer) => this.to.audio(ts, body),
      event: (e: { type: string; message?: string }) => {
        if (e.type === 'error') this.fail(`bad output: ${e.message ?? ''}`);
      },
    };
    this.child.stdout!.on('data', (d: Buffer) => {
      if (!this.closed) parser.pushTo(d, handler);
    });
    this.child.stdin!.write(this.ogg.header(opusHead()));
  }

  push(packet: Uint8Array): void {
    if (this.closed) return;
    if (this.child.stdin!.writableLength > 1 << 20) return this.fail('ffmpeg stopped reading its input');
    this.child.stdin!.write(this.ogg.packet(packet));
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.child.stdin!.end();
    const kill = setTimeout(() => this.child.kill('SIGKILL'), 2000);
    kill.unref();
    this.child.once('exit', () => clearTimeout(kill));
  }

  private fail(why: string): void {
    if (this.closed) return;
    this.closed = true;
    this.child.kill('SIGKILL');
    this.to.failed(why);
  }
}
