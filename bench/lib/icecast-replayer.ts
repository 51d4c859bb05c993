/**
 * A light Icecast source client for the ingest bench: replays the AAC frames of a recorded FLV
 * file as ADTS (ISO/IEC 13818-7 §6.2, 7-byte headers without CRC) over many Icecast source
 * connections from one Node process, in real time, like an encoder sending `audio/aac`.
 *
 * Per connection (Icecast 2.4 source protocol, as FFmpeg's `icecast://` and libshout speak it):
 * `PUT /live/<stream_id> HTTP/1.1` with HTTP Basic `source:<stream key>`, `Content-Type:
 * audio/aac` and `Expect: 100-continue`; on the server's `200 OK` the body starts: the ADTS frames,
 * unchunked, for as long as the connection lasts. The file loops.
 *
 * Cheap by construction, like the RTMP replayer (rtmp-replayer.ts): one loop of ADTS frames is
 * pre-built once into ONE buffer shared by every source, sending is `socket.write(loop.subarray(a,
 * b))`, and ONE interval timer drives every source (on each tick a source writes the frames that
 * have come due, usually one 21 ms frame).
 */
import net from 'node:net';
import type { FlvAudio, PoolStats } from './rtmp-replayer.js';

const AAC_RATES = [96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000, 7350];

/** Where one source sends: host, port, the stream id (mount `/live/<id>`) and the stream key. */
export interface IcecastTarget {
  host: string;
  port: number;
  streamId: string;
  key: string;
}

/** One loop of the file as ADTS: the bytes, each frame's end offset and due time (ms from loop start). */
class AdtsLoop {
  readonly bytes: Buffer;
  readonly ends: number[] = [];
  readonly dueMs: number[] = [];
  readonly loopMs: number;

  constructor(media: FlvAudio) {
    // AudioSpecificConfig (ISO/IEC 14496-3 §1.6.2.1): object type 5 bits, frequency index 4, channels 4.
    const asc = (media.header[2]! << 8) | media.header[3]!;
    const objectType = asc >> 11;
    const freqIndex = (asc >> 7) & 0x0f;
    const channels = (asc >> 3) & 0x0f;
    const parts: Buffer[] = [];
    let end = 0;
    const frameMs = (1024 * 1000) / (AAC_RATES[freqIndex] ?? media.sampleRate);
    media.frames.forEach((f, i) => {
      const raw = f.data.subarray(2); // FLV AACPacketType 1: [SoundFormat byte, 1, raw frame]
      const len = raw.length + 7;
      const h = Buffer.alloc(7);
      h[0] = 0xff;
      h[1] = 0xf1; // MPEG-4, layer 0, protection absent
      h[2] = (((objectType - 1) & 0x3) << 6) | (freqIndex << 2) | ((channels >> 2) & 0x1);
      h[3] = ((channels & 0x3) << 6) | ((len >> 11) & 0x3);
      h[4] = (len >> 3) & 0xff;
      h[5] = ((len & 0x7) << 5) | 0x1f; // buffer fullness 0x7FF (VBR)
      h[6] = 0xfc; // … and one raw data block
      parts.push(h, Buffer.from(raw));
      end += len;
      this.ends.push(end);
      this.dueMs.push(i * frameMs);
    });
    this.bytes = Buffer.concat(parts);
    this.loopMs = media.frames.length * frameMs;
  }
}

/** One Icecast source connection. */
export class IcecastSourceClient {
  readonly started: Promise<{ connectAt: number; acceptedAt: number }>;
  state: 'connecting' | 'head' | 'publishing' | 'closed' = 'connecting';
  closeReason: string | null = null;
  bytesOut = 0;
  maxLateMs = 0;
  private readonly socket: net.Socket;
  private startAt = 0;
  private frame = 0;
  private loopN = 0;
  private reply = '';

  constructor(target: IcecastTarget, private readonly pool: IcecastPool) {
    const connectAt = performance.now();
    this.socket = net.connect({ host: target.host, port: target.port });
    this.socket.setNoDelay(true);
    this.started = new Promise((resolve, reject) => {
      this.socket.once('connect', () => {
        this.state = 'head';
        const auth = Buffer.from(`source:${target.key}`).toString('base64');
        this.socket.write(
          `PUT /live/${target.streamId} HTTP/1.1\r\nHost: ${target.host}:${target.port}\r\nAuthorization: Basic ${auth}\r\n` +
            `User-Agent: skylark-bench\r\nContent-Type: audio/aac\r\nIce-Public: 0\r\nExpect: 100-continue\r\n\r\n`,
        );
      });
      this.socket.on('data', (d) => {
        if (this.state !== 'head') return; // after the head, what the server says is discarded
        this.reply += d.toString('latin1');
        if (this.reply.length > 16384) return this.close('reply head too long');
        // 100 Continue, then 200 OK (both may come in one read).
        const ok = /HTTP\/1\.[01] 200[^\r\n]*\r\n(?:[^\r\n]+\r\n)*\r\n/.exec(this.reply);
        if (ok) {
          this.state = 'publishing';
          this.startAt = performance.now();
          this.pool.attach(this);
          resolve({ connectAt, acceptedAt: this.startAt });
          return;
        }
        const other = /HTTP\/1\.[01] ([2-5]\d\d)/g;
        for (let m = other.exec(this.reply); m; m = other.exec(this.reply)) {
          if (m[1] !== '100' && m[1] !== '200') return this.close(`server answered ${m[1]}: ${this.reply.slice(0, 200).replace(/\r\n/g, ' | ')}`);
        }
      });
      const closed = (why: string) => {
        const was = this.state;
        if (was === 'closed') return;
        this.state = 'closed';
        this.closeReason ??= why;
        this.pool.detach(this, was === 'publishing');
        reject(new Error(this.closeReason));
      };
      this.socket.on('error', (e) => closed(e.message));
      this.socket.on('close', () => closed('connection closed by the server'));
    });
    this.started.catch(() => {});
  }

  /** Closes the connection (counted as closed by us). */
  close(why = 'closed by us'): void {
    this.closeReason ??= why;
    this.socket.destroy();
  }

  /** Writes every frame due by `now` (ms, performance.now()) in one write. @internal */
  tick(now: number): void {
    const loop = this.pool.loop;
    const elapsed = now - this.startAt - this.loopN * loop.loopMs;
    const from = this.frame;
    let to = from;
    while (to < loop.dueMs.length && loop.dueMs[to]! <= elapsed) to++;
    if (to > from) {
      const late = elapsed - loop.dueMs[to - 1]!;
      if (late > this.maxLateMs) this.maxLateMs = late;
      const a = from === 0 ? 0 : loop.ends[from - 1]!;
      const b = loop.ends[to - 1]!;
      this.socket.write(loop.bytes.subarray(a, b));
      this.bytesOut += b - a;
    }
    this.frame = to;
    if (to === loop.dueMs.length) {
      this.frame = 0;
      this.loopN++;
    }
  }
}

/** Many Icecast sources of one file, driven by ONE timer; the same counters as the RTMP pool. */
export class IcecastPool {
  readonly loop: AdtsLoop;
  private readonly active = new Set<IcecastSourceClient>();
  private timer: NodeJS.Timeout | null = null;
  private dropped = 0;
  private readonly reasons: string[] = [];
  private bytesOutClosed = 0;

  constructor(media: FlvAudio, private readonly tickMs = 10) {
    this.loop = new AdtsLoop(media);
  }

  /**
   * Starts a source on every target, at most `concurrency` heads in flight; the failures by target
   * index and each started source's connect → 200 OK time (ms).
   */
  async publishAll(targets: IcecastTarget[], concurrency = 32, timeoutMs = 15_000): Promise<{ acceptMs: number[]; failed: Array<{ index: number; reason: string }> }> {
    const failed: Array<{ index: number; reason: string }> = [];
    const acceptMs: number[] = [];
    let next = 0;
    const worker = async () => {
      while (next < targets.length) {
        const i = next++;
        const client = new IcecastSourceClient(targets[i]!, this);
        let timer: NodeJS.Timeout | undefined;
        try {
          const t = await Promise.race([
            client.started,
            new Promise<never>((_, rej) => {
              timer = setTimeout(() => rej(new Error(`no 200 OK within ${timeoutMs} ms (state ${client.state})`)), timeoutMs);
            }),
          ]);
          acceptMs.push(Math.round((t.acceptedAt - t.connectAt) * 10) / 10);
        } catch (e) {
          failed.push({ index: i, reason: (e as Error).message });
          client.close();
        } finally {
          clearTimeout(timer);
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(concurrency, targets.length) }, worker));
    return { acceptMs, failed };
  }

  /** @internal a source was accepted */
  attach(c: IcecastSourceClient): void {
    this.active.add(c);
    if (!this.timer) this.timer = setInterval(() => this.tick(), this.tickMs);
  }

  /** @internal a source closed */
  detach(c: IcecastSourceClient, wasPublishing: boolean): void {
    this.active.delete(c);
    this.bytesOutClosed += c.bytesOut;
    if (c.closeReason !== 'closed by us') {
      if (wasPublishing) this.dropped++;
      if (this.reasons.length < 5) this.reasons.push(c.closeReason ?? '?');
    }
    if (this.active.size === 0 && this.timer) {
      clearInterval(this.timer);
      this.timer = null;
    }
  }

  private tick(): void {
    const now = performance.now();
    for (const c of this.active) c.tick(now);
  }

  stats(): PoolStats {
    let maxLateMs = 0;
    let bytesOut = this.bytesOutClosed;
    for (const c of this.active) {
      if (c.maxLateMs > maxLateMs) maxLateMs = c.maxLateMs;
      c.maxLateMs = 0;
      bytesOut += c.bytesOut;
    }
    return { publishing: this.active.size, dropped: this.dropped, reasons: [...this.reasons], bytesOut, maxLateMs };
  }

  /** Closes every source. */
  close(): void {
    for (const c of [...this.active]) c.close();
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }
}
