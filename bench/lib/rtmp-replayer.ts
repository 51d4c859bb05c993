/**
 * A light RTMP publisher for the ingest bench: replays the AAC audio tags of a recorded FLV file
 * in real time over many connections from one Node process, so that the load generator costs far
 * less than the server it loads (an FFmpeg `-c copy` publisher costs ~3× what nginx-rtmp spends
 * ingesting; docs/bench/method.md "The peers measured alone").
 *
 * Per connection (RTMP 1.0 spec): C0+C1 → S0+S1+S2 → C2 (simple handshake, zero version field);
 * Set Chunk Size 4096; `connect` (app, tcUrl, flashVer FMLE); on its `_result`: `releaseStream`,
 * `FCPublish`, `createStream`; on createStream's `_result` (the stream id): `publish <name> live`;
 * on onStatus `NetStream.Publish.Start`: the AAC sequence header (fmt 0), then every audio frame as
 * one fmt-1 chunk on csid 4 (each message is < 4096 bytes, so a message is exactly one chunk). The
 * file loops with continuing timestamps.
 *
 * Cheap by construction: the fmt-1 chunks of one loop are pre-built once into ONE buffer shared by
 * every publisher (a fmt-1 header has no stream id, and the deltas depend only on the file), so
 * sending is `socket.write(loop.subarray(a, b))`, no per-message allocation. ONE interval timer
 * drives every publisher of the pool; on each tick a publisher writes what has come due (usually
 * one 21 ms AAC frame, i.e. about one write per frame like a real encoder). What the server sends
 * is parsed (chunk stream + enough AMF0 for `_result`/`onStatus`) and otherwise discarded;
 * Acknowledgement is sent each time the server's Window Acknowledgement Size is crossed and Ping
 * Requests are answered (nginx-rtmp closes a silent connection after an unanswered ping).
 */
import net from 'node:net';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';

// ── FLV ──────────────────────────────────────────────────────────────────────────────────────

/** The audio of an FLV file: the AAC sequence header and the coded frames, with their timestamps (ms). */
export interface FlvAudio {
  header: Uint8Array;
  frames: Array<{ ts: number; data: Uint8Array }>;
  sampleRate: number;
  channels: number;
  /** One loop of the file in ms (frames × 1024 / sample rate, rounded): loop k adds k × loopMs. */
  loopMs: number;
  /** Mean audio payload bitrate (kbit/s, FLV audio tag bodies). */
  kbps: number;
}

const AAC_RATES = [96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000, 7350];

/** Reads the AAC audio tags of an FLV file (FLV spec v10, E.4). @throws Error when it holds no AAC audio */
export function readFlvAudio(file: string): FlvAudio {
  const b = readFileSync(file);
  if (b.length < 13 || b.toString('latin1', 0, 3) !== 'FLV') throw new Error(`${file}: not an FLV file`);
  let p = b.readUInt32BE(5) + 4; // header size + PreviousTagSize0
  let header: Uint8Array | null = null;
  const frames: FlvAudio['frames'] = [];
  while (p + 11 <= b.length) {
    const type = b[p]!;
    const size = b.readUIntBE(p + 1, 3);
    const ts = b.readUIntBE(p + 4, 3) | (b[p + 7]! << 24);
    const body = b.subarray(p + 11, p + 11 + size);
    p += 11 + size + 4;
    if (type !== 8 || body.length < 2) continue;
    if (body[0]! >> 4 !== 10) throw new Error(`${file}: audio is not AAC (SoundFormat ${body[0]! >> 4})`);
    if (body[1] === 0) header ??= new Uint8Array(body);
    else if (header) frames.push({ ts, data: new Uint8Array(body) });
  }
  if (!header || frames.length < 2) throw new Error(`${file}: no AAC sequence header and frames`);
  // AudioSpecificConfig: 5 bits object type, 4 bits sampling frequency index, 4 bits channels.
  const asc = (header[2]! << 8) | header[3]!;
  const sampleRate = AAC_RATES[(asc >> 7) & 0x0f] ?? 48000;
  const channels = (asc >> 3) & 0x0f;
  const loopMs = Math.round((frames.length * 1024 * 1000) / sampleRate);
  const bytes = frames.reduce((a, f) => a + f.data.length, 0);
  return { header, frames, sampleRate, channels, loopMs, kbps: (bytes * 8) / loopMs };
}

// ── AMF0 ─────────────────────────────────────────────────────────────────────────────────────

type AmfValue = number | boolean | string | null | undefined | { [k: string]: AmfValue } | AmfValue[];

function amfEncode(values: AmfValue[]): Buffer {
  const parts: Buffer[] = [];
  const str = (s: string) => {
    const d = Buffer.from(s, 'utf8');
    const h = Buffer.alloc(2);
    h.writeUInt16BE(d.length);
    parts.push(h, d);
  };
  const val = (v: AmfValue) => {
    if (typeof v === 'number') {
      const d = Buffer.alloc(9);
      d[0] = 0;
      d.writeDoubleBE(v, 1);
      parts.push(d);
    } else if (typeof v === 'boolean') parts.push(Buffer.from([1, v ? 1 : 0]));
    else if (typeof v === 'string') {
      parts.push(Buffer.from([2]));
      str(v);
    } else if (v === null || v === undefined) parts.push(Buffer.from([5]));
    else if (Array.isArray(v)) throw new Error('amf0: arrays are not encoded here');
    else {
      parts.push(Buffer.from([3]));
      for (const [k, x] of Object.entries(v)) {
        str(k);
        val(x);
      }
      parts.push(Buffer.from([0, 0, 9]));
    }
  };
  for (const v of values) val(v);
  return Buffer.concat(parts);
}

/** Decodes AMF0 values until the end (or the first unknown marker). Enough for command replies. */
export function amfDecode(b: Uint8Array): AmfValue[] {
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  let p = 0;
  const out: AmfValue[] = [];
  const str = (long = false) => {
    const n = long ? dv.getUint32(p) : dv.getUint16(p);
    p += long ? 4 : 2;
    const s = Buffer.from(b.buffer, b.byteOffset + p, n).toString('utf8');
    p += n;
    return s;
  };
  const props = () => {
    const o: Record<string, AmfValue> = {};
    for (;;) {
      const k = str();
      if (k === '' && b[p] === 9) {
        p++;
        return o;
      }
      o[k] = val();
    }
  };
  const val = (): AmfValue => {
    const m = b[p++];
    switch (m) {
      case 0: {
        const v = dv.getFloat64(p);
        p += 8;
        return v;
      }
      case 1:
        return b[p++] !== 0;
      case 2:
        return str();
      case 3:
        return props();
      case 5:
        return null;
      case 6:
        return undefined;
      case 8:
        p += 4;
        return props();
      case 10: {
        const n = dv.getUint32(p);
        p += 4;
        const a: AmfValue[] = [];
        for (let i = 0; i < n; i++) a.push(val());
        return a;
      }
      case 11:
        p += 10;
        return null;
      case 12:
        return str(true);
      default:
        throw new Error(`amf0 marker ${m}`);
    }
  };
  try {
    while (p < b.length) out.push(val());
  } catch {
    /* truncated or unknown: what was decoded is enough */
  }
  return out;
}

// ── chunks ───────────────────────────────────────────────────────────────────────────────────

const MSG_SET_CHUNK_SIZE = 1;
const MSG_ACK = 3;
const MSG_USER_CONTROL = 4;
const MSG_WINDOW_ACK_SIZE = 5;
const MSG_AUDIO = 8;
const MSG_AMF0_COMMAND = 20;
const OUT_CHUNK_SIZE = 4096;
const CSID_CONTROL = 2;
const CSID_COMMAND = 3;
const CSID_AUDIO = 4;

/** One message as a single chunk, basic header fmt 0 (csid < 64; body ≤ OUT_CHUNK_SIZE). */
function chunk0(csid: number, type: number, msid: number, ts: number, body: Uint8Array): Buffer {
  if (body.length > OUT_CHUNK_SIZE) throw new Error(`message of ${body.length} B does not fit one chunk`);
  const ext = ts >= 0xffffff;
  const h = Buffer.alloc(12 + (ext ? 4 : 0));
  h[0] = csid;
  h.writeUIntBE(ext ? 0xffffff : ts, 1, 3);
  h.writeUIntBE(body.length, 4, 3);
  h[7] = type;
  h.writeUInt32LE(msid, 8);
  if (ext) h.writeUInt32BE(ts, 12);
  return Buffer.concat([h, body]);
}

/** One message as a single fmt-1 chunk (timestamp delta, length, type; the stream id of the csid's last fmt 0). */
function chunk1(csid: number, type: number, delta: number, body: Uint8Array): Buffer {
  if (body.length > OUT_CHUNK_SIZE) throw new Error(`message of ${body.length} B does not fit one chunk`);
  if (delta >= 0xffffff || delta < 0) throw new Error(`timestamp delta ${delta} out of range`);
  const h = Buffer.alloc(8);
  h[0] = (1 << 6) | csid;
  h.writeUIntBE(delta, 1, 3);
  h.writeUIntBE(body.length, 4, 3);
  h[7] = type;
  return Buffer.concat([h, body]);
}

const u32 = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n >>> 0);
  return b;
};

/** What one pool shares between its publishers: the pre-built audio chunks of one loop. */
class Prebuilt {
  /** fmt-1 chunks of frames 0..n-1 for loops ≥ 1 (frame 0's delta wraps from the previous loop's last frame). */
  readonly loop: Buffer;
  /** offsets[i]: where frame i's chunk starts in `loop`; offsets[n] = loop.length. */
  readonly offsets: Uint32Array;
  /** Frame i's time in the loop (ms), from frame 0. */
  readonly due: Float64Array;
  /** Loop 0's frame 0 chunk (its delta is from the sequence header). */
  readonly first: Buffer;
  readonly n: number;

  constructor(readonly media: FlvAudio) {
    const f = media.frames;
    this.n = f.length;
    const t0 = f[0]!.ts;
    const wrap = media.loopMs - (f[this.n - 1]!.ts - t0);
    if (wrap <= 0) throw new Error('FLV loop: the last frame is past the loop length');
    const parts: Buffer[] = [];
    this.offsets = new Uint32Array(this.n + 1);
    this.due = new Float64Array(this.n);
    let off = 0;
    for (let i = 0; i < this.n; i++) {
      const delta = i === 0 ? wrap : f[i]!.ts - f[i - 1]!.ts;
      const c = chunk1(CSID_AUDIO, MSG_AUDIO, delta, f[i]!.data);
      parts.push(c);
      this.offsets[i] = off;
      this.due[i] = f[i]!.ts - t0;
      off += c.length;
    }
    this.offsets[this.n] = off;
    this.loop = Buffer.concat(parts);
    this.first = chunk1(CSID_AUDIO, MSG_AUDIO, 0, f[0]!.data); // header and frame 0 both at t0
  }

  /** The sequence header at t0 (fmt 0: absolute time, the stream id). */
  header(msid: number): Buffer {
    return chunk0(CSID_AUDIO, MSG_AUDIO, msid, this.media.frames[0]!.ts, this.media.header);
  }
}

// ── one publisher ────────────────────────────────────────────────────────────────────────────

/** Where and as what to publish. */
export interface PublishTarget {
  host: string;
  port: number;
  /** RTMP app: `live/<stream_id>` for Skylark, `live` for nginx-rtmp. */
  app: string;
  /** Stream name: the stream key for Skylark, any name for nginx-rtmp. */
  name: string;
  /** Defaults to rtmp://host:port/app. */
  tcUrl?: string;
}

/** Times (performance.now() ms) of one publish. */
export interface PublishTimes {
  connectAt: number;
  /** onStatus NetStream.Publish.Start received; audio starts now. */
  publishAt: number;
}

type State = 'handshake' | 'connecting' | 'creating' | 'publishing-wait' | 'publishing' | 'closed';

interface InChunkStream {
  ts: number;
  len: number;
  type: number;
  msid: number;
  delta: number;
  extended: boolean;
  parts: Buffer[] | null;
  got: number;
}

export class RtmpPublisher {
  state: State = 'handshake';
  /** Why it closed (null while open, 'closed by us' after close()). */
  closeReason: string | null = null;
  readonly times: PublishTimes = { connectAt: performance.now(), publishAt: NaN };
  bytesOut = 0;
  bytesIn = 0;
  /** Largest lateness of a write against its frame's due time (ms), since the last stats read. */
  maxLateMs = 0;

  private readonly socket: net.Socket;
  private pending: Buffer = Buffer.alloc(0);
  private c1: Buffer | null = null;
  private inChunkSize = 128;
  private readonly streams = new Map<number, InChunkStream>();
  private serverWindow = 0;
  private lastAck = 0;
  private msid = 0;
  // Pacing: frame `idx` of loop `loopNo` is due at startAt + loopNo × loopMs + due[idx].
  private startAt = 0;
  private loopNo = 0;
  private idx = 1;
  private resolve!: (t: PublishTimes) => void;
  private reject!: (e: Error) => void;
  readonly started: Promise<PublishTimes>;

  constructor(readonly target: PublishTarget, private readonly pool: ReplayPool) {
    this.started = new Promise((res, rej) => {
      this.resolve = res;
      this.reject = rej;
    });
    this.started.catch(() => {});
    this.socket = net.connect({ host: target.host, port: target.port, noDelay: true });
    this.socket.on('connect', () => {
      this.c1 = Buffer.alloc(1536);
      this.c1.writeUInt32BE(Math.floor(performance.now()) >>> 0, 0); // time; bytes 4..7 zero: simple handshake
      randomBytes(1528).copy(this.c1, 8);
      this.write(Buffer.concat([Buffer.from([3]), this.c1]));
    });
    this.socket.on('data', (d) => this.onData(d));
    this.socket.on('error', (e) => this.fail(`socket error: ${e.message}`));
    this.socket.on('close', () => this.fail(this.state === 'publishing' ? 'server closed the connection' : `closed during ${this.state}`));
  }

  /** Stops publishing: closes the socket (no deleteStream: a publisher that vanishes). */
  close(): void {
    if (this.state === 'closed') return;
    this.fail('closed by us');
    this.socket.destroy();
  }

  /** Called by the pool's timer: writes every frame that has come due. */
  tick(now: number): void {
    if (this.state !== 'publishing') return;
    const pre = this.pool.pre;
    let dueAt = this.startAt + this.loopNo * pre.media.loopMs + pre.due[this.idx]!;
    if (dueAt > now) return;
    const late = now - dueAt;
    if (late > this.maxLateMs) this.maxLateMs = late;
    const from = this.idx;
    while (dueAt <= now) {
      this.idx++;
      if (this.idx === pre.n) break;
      dueAt = this.startAt + this.loopNo * pre.media.loopMs + pre.due[this.idx]!;
    }
    this.write(pre.loop.subarray(pre.offsets[from]!, pre.offsets[this.idx]!));
    if (this.idx === pre.n) {
      this.idx = 0;
      this.loopNo++;
      this.tick(now); // the next loop's frame 0 may be due too
    }
  }

  private write(b: Uint8Array): void {
    if (this.socket.destroyed) return;
    this.bytesOut += b.length;
    this.socket.write(b);
  }

  private fail(reason: string): void {
    if (this.state === 'closed') return;
    const wasPublishing = this.state === 'publishing';
    this.state = 'closed';
    this.closeReason = reason;
    this.pool.detach(this, wasPublishing);
    this.reject(new Error(reason));
    if (!this.socket.destroyed) this.socket.destroy();
  }

  private command(values: AmfValue[], msid = 0): void {
    this.write(chunk0(CSID_COMMAND, MSG_AMF0_COMMAND, msid, 0, amfEncode(values)));
  }

  private onData(d: Buffer): void {
    this.bytesIn += d.length;
    this.pending = this.pending.length ? Buffer.concat([this.pending, d]) : d;
    if (this.state === 'handshake') {
      if (this.pending.length < 1 + 1536 + 1536) return;
      if (this.pending[0] !== 3) return this.fail(`handshake: S0 version ${this.pending[0]}`);
      const s1 = this.pending.subarray(1, 1537);
      this.pending = this.pending.subarray(1 + 1536 + 1536);
      const tcUrl = this.target.tcUrl ?? `rtmp://${this.target.host}:${this.target.port}/${this.target.app}`;
      this.write(
        Buffer.concat([
          s1, // C2 echoes S1
          chunk0(CSID_CONTROL, MSG_SET_CHUNK_SIZE, 0, 0, u32(OUT_CHUNK_SIZE)),
          chunk0(
            CSID_COMMAND,
            MSG_AMF0_COMMAND,
            0,
            0,
            amfEncode(['connect', 1, { app: this.target.app, type: 'nonprivate', flashVer: 'FMLE/3.0 (compatible; skylark-bench)', tcUrl }]),
          ),
        ]),
      );
      this.state = 'connecting';
    }
    this.readChunks();
    if (this.serverWindow > 0 && this.bytesIn - this.lastAck >= this.serverWindow) {
      this.lastAck = this.bytesIn;
      this.write(chunk0(CSID_CONTROL, MSG_ACK, 0, 0, u32(this.bytesIn)));
    }
  }

  /** Parses the server's chunk stream (RTMP 1.0 §5.3.1), handling each complete message. */
  private readChunks(): void {
    const b = this.pending;
    let p = 0;
    for (;;) {
      if (this.state === 'closed') return;
      const start = p;
      if (b.length - p < 1) break;
      const fmt = b[p]! >> 6;
      let csid = b[p]! & 0x3f;
      p++;
      if (csid === 0) {
        if (b.length - p < 1) { p = start; break; }
        csid = 64 + b[p]!;
        p++;
      } else if (csid === 1) {
        if (b.length - p < 2) { p = start; break; }
        csid = 64 + b[p]! + b[p + 1]! * 256;
        p += 2;
      }
      const hlen = [11, 7, 3, 0][fmt]!;
      if (b.length - p < hlen) { p = start; break; }
      let cs = this.streams.get(csid);
      if (!cs) {
        if (fmt !== 0) return this.fail(`server chunk: fmt ${fmt} on a new csid ${csid}`);
        cs = { ts: 0, len: 0, type: 0, msid: 0, delta: 0, extended: false, parts: null, got: 0 };
        this.streams.set(csid, cs);
      }
      // Read the whole header and check the payload is here before changing the csid's state.
      let tsField = fmt <= 2 ? b.readUIntBE(p, 3) : 0;
      const len = fmt <= 1 ? b.readUIntBE(p + 3, 3) : cs.len;
      const type = fmt <= 1 ? b[p + 6]! : cs.type;
      const msid = fmt === 0 ? b.readUInt32LE(p + 7) : cs.msid;
      p += hlen;
      const ext = fmt <= 2 ? tsField === 0xffffff : cs.extended;
      if (ext) {
        if (b.length - p < 4) { p = start; break; }
        tsField = b.readUInt32BE(p);
        p += 4;
      }
      const want = Math.min(this.inChunkSize, len - (cs.parts === null ? 0 : cs.got));
      if (b.length - p < want) { p = start; break; }
      cs.len = len;
      cs.type = type;
      cs.msid = msid;
      if (fmt <= 2) cs.extended = ext;
      if (cs.parts === null) {
        cs.got = 0;
        if (fmt === 0) cs.ts = tsField;
        else if (fmt <= 2) {
          cs.delta = tsField;
          cs.ts += tsField;
        } else cs.ts += cs.delta;
      }
      // Copied: `b` is dropped or replaced after this pass (the server sends little, so this is cheap).
      const piece = Buffer.from(b.subarray(p, p + want));
      p += want;
      if (cs.parts === null) cs.parts = [];
      cs.parts.push(piece);
      cs.got += want;
      if (cs.got >= cs.len) {
        const body = cs.parts.length === 1 ? cs.parts[0]! : Buffer.concat(cs.parts);
        cs.parts = null;
        cs.got = 0;
        this.onMessage(cs.type, cs.msid, body);
      }
    }
    this.pending = p >= b.length ? Buffer.alloc(0) : Buffer.from(b.subarray(p));
  }

  private onMessage(type: number, _msid: number, body: Buffer): void {
    switch (type) {
      case MSG_SET_CHUNK_SIZE:
        if (body.length >= 4) this.inChunkSize = body.readUInt32BE(0) & 0x7fffffff;
        return;
      case MSG_WINDOW_ACK_SIZE:
        if (body.length >= 4) this.serverWindow = body.readUInt32BE(0);
        return;
      case MSG_USER_CONTROL:
        // Ping Request (6) → Ping Response (7) with the same timestamp.
        if (body.length >= 6 && body.readUInt16BE(0) === 6) {
          const r = Buffer.alloc(6);
          r.writeUInt16BE(7, 0);
          body.copy(r, 2, 2, 6);
          this.write(chunk0(CSID_CONTROL, MSG_USER_CONTROL, 0, 0, r));
        }
        return;
      case MSG_AMF0_COMMAND:
        return this.onCommand(amfDecode(body));
      default:
        return; // Ack, Set Peer Bandwidth, anything else: nothing to do for a publisher
    }
  }

  private onCommand(v: AmfValue[]): void {
    const name = v[0];
    const txn = v[1];
    if (name === '_result' && txn === 1 && this.state === 'connecting') {
      this.command(['releaseStream', 2, null, this.target.name]);
      this.command(['FCPublish', 3, null, this.target.name]);
      this.command(['createStream', 4, null]);
      this.state = 'creating';
      return;
    }
    if (name === '_error') return this.fail(`server answered _error to transaction ${String(txn)}: ${describe(v[3])}`);
    if (name === '_result' && txn === 4 && this.state === 'creating') {
      const id = v[3];
      if (typeof id !== 'number') return this.fail('createStream _result without a stream id');
      this.msid = id;
      this.command(['publish', 5, null, this.target.name, 'live'], this.msid);
      this.state = 'publishing-wait';
      return;
    }
    if (name === 'onStatus') {
      const info = v[3];
      const code = info && typeof info === 'object' && !Array.isArray(info) ? info.code : undefined;
      if (this.state === 'publishing-wait' && code === 'NetStream.Publish.Start') {
        this.state = 'publishing';
        this.times.publishAt = performance.now();
        this.startAt = this.times.publishAt;
        this.loopNo = 0;
        this.idx = 1;
        const pre = this.pool.pre;
        this.write(Buffer.concat([pre.header(this.msid), pre.first]));
        this.pool.attach(this);
        this.resolve(this.times);
        return;
      }
      if (info && typeof info === 'object' && !Array.isArray(info) && info.level === 'error') {
        return this.fail(`onStatus ${String(code)}: ${String(info.description ?? '')}`);
      }
    }
  }
}

function describe(v: AmfValue): string {
  if (v && typeof v === 'object' && !Array.isArray(v)) return `${String(v.code ?? '')} ${String(v.description ?? '')}`.trim();
  return String(v);
}

// ── the pool ─────────────────────────────────────────────────────────────────────────────────

/** Counters of a pool, for the bench's report. */
export interface PoolStats {
  /** Publishers currently publishing. */
  publishing: number;
  /** Publishers that were publishing and then lost their connection (not closed by us). */
  dropped: number;
  /** Close reasons of dropped or failed publishers (first few). */
  reasons: string[];
  bytesOut: number;
  /** Largest lateness of a frame write against its due time (ms) since the last stats() call. */
  maxLateMs: number;
}

/** Many publishers of one FLV, driven by ONE timer. */
export class ReplayPool {
  readonly pre: Prebuilt;
  private readonly active = new Set<RtmpPublisher>();
  private timer: NodeJS.Timeout | null = null;
  private dropped = 0;
  private readonly reasons: string[] = [];
  private bytesOutClosed = 0;

  constructor(media: FlvAudio, private readonly tickMs = 10) {
    this.pre = new Prebuilt(media);
  }

  /** Starts one publisher; resolves when the server answered NetStream.Publish.Start. @throws Error (rejection) with the reason it failed */
  publish(target: PublishTarget): { publisher: RtmpPublisher; started: Promise<PublishTimes> } {
    const publisher = new RtmpPublisher(target, this);
    return { publisher, started: publisher.started };
  }

  /** Publishes to every target with at most `concurrency` handshakes in flight; the failures, by target index. */
  async publishAll(targets: PublishTarget[], concurrency = 32, timeoutMs = 15_000): Promise<{ publishers: RtmpPublisher[]; failed: Array<{ index: number; reason: string }> }> {
    const publishers: RtmpPublisher[] = new Array(targets.length);
    const failed: Array<{ index: number; reason: string }> = [];
    let next = 0;
    const worker = async () => {
      while (next < targets.length) {
        const i = next++;
        const { publisher, started } = this.publish(targets[i]!);
        publishers[i] = publisher;
        let timer: NodeJS.Timeout | undefined;
        try {
          await Promise.race([
            started,
            new Promise<never>((_, rej) => {
              timer = setTimeout(() => rej(new Error(`no NetStream.Publish.Start within ${timeoutMs} ms (state ${publisher.state})`)), timeoutMs);
            }),
          ]);
        } catch (e) {
          failed.push({ index: i, reason: (e as Error).message });
          publisher.close();
        } finally {
          clearTimeout(timer);
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(concurrency, targets.length) }, worker));
    return { publishers, failed };
  }

  /** @internal a publisher started publishing */
  attach(p: RtmpPublisher): void {
    this.active.add(p);
    if (!this.timer) this.timer = setInterval(() => this.tick(), this.tickMs);
  }

  /** @internal a publisher closed */
  detach(p: RtmpPublisher, wasPublishing: boolean): void {
    this.active.delete(p);
    this.bytesOutClosed += p.bytesOut;
    if (p.closeReason !== 'closed by us') {
      if (wasPublishing) this.dropped++;
      if (this.reasons.length < 5) this.reasons.push(p.closeReason ?? '?');
    }
    if (this.active.size === 0 && this.timer) {
      clearInterval(this.timer);
      this.timer = null;
    }
  }

  private tick(): void {
    const now = performance.now();
    for (const p of this.active) p.tick(now);
  }

  stats(): PoolStats {
    let maxLateMs = 0;
    let bytesOut = this.bytesOutClosed;
    for (const p of this.active) {
      if (p.maxLateMs > maxLateMs) maxLateMs = p.maxLateMs;
      p.maxLateMs = 0;
      bytesOut += p.bytesOut;
    }
    return { publishing: this.active.size, dropped: this.dropped, reasons: [...this.reasons], bytesOut, maxLateMs };
  }

  /** Closes every publisher. */
  close(): void {
    for (const p of [...this.active]) p.close();
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }
}
