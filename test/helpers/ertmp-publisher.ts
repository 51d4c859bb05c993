/**
 * A tiny Enhanced RTMP (E-RTMP v2) publisher for tests: FFmpeg 5.1 cannot send Opus over RTMP, so
 * this node:net client does the RTMP handshake, `connect` (with `fourCcList: ['Opus']`),
 * `createStream` and `publish`, then sends audio messages with the ExHeader byte
 * `0x90 | AudioPacketType` and FourCC `Opus`: a SequenceStart carrying the OpusHead, then one
 * CodedFrames message per Opus packet, paced in real time. The packets come from an Ogg Opus file
 * (made by FFmpeg's libopus from a sine) parsed with src/live/media/ogg.ts.
 */
import net from 'node:net';
import { randomBytes } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { ffmpegPath } from './ffmpeg.js';
import { OggReader, opusPacketSamples } from '../../src/live/media/ogg.js';

/** OpusHead and the audio packets of an Ogg Opus file. */
export interface OpusFile {
  head: Buffer;
  packets: Buffer[];
}

/** Encodes a sine of `seconds` at `frequency` Hz to Ogg Opus (48 kHz stereo, 20 ms frames) at `file` and reads it. */
export function makeOpusFile(file: string, seconds: number, frequency = 440): OpusFile {
  const r = spawnSync(ffmpegPath(), ['-hide_banner', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', `sine=frequency=${frequency}:sample_rate=48000`, '-t', String(seconds),
    '-ac', '2', '-c:a', 'libopus', '-b:a', '96k', '-frame_duration', '20', file], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`ffmpeg failed: ${r.stderr}`);
  const packets = new OggReader().push(readFileSync(file));
  const head = packets.shift();
  packets.shift(); // OpusTags
  if (!head || head.subarray(0, 8).toString('latin1') !== 'OpusHead') throw new Error('not an Ogg Opus file');
  return { head, packets };
}

// ── AMF0 (just what the commands need) ──
type Amf = number | string | null | boolean | Amf[] | { [k: string]: Amf };
function amf(v: Amf): Buffer {
  if (v === null) return Buffer.from([0x05]);
  if (typeof v === 'number') {
    const b = Buffer.alloc(9);
    b[0] = 0x00;
    b.writeDoubleBE(v, 1);
    return b;
  }
  if (typeof v === 'boolean') return Buffer.from([0x01, v ? 1 : 0]);
  if (typeof v === 'string') {
    const s = Buffer.from(v, 'utf8');
    const b = Buffer.alloc(3);
    b[0] = 0x02;
    b.writeUInt16BE(s.length, 1);
    return Buffer.concat([b, s]);
  }
  if (Array.isArray(v)) {
    const h = Buffer.alloc(5);
    h[0] = 0x0a;
    h.writeUInt32BE(v.length, 1);
    return Buffer.concat([h, ...v.map(amf)]);
  }
  const parts: Buffer[] = [Buffer.from([0x03])];
  for (const [k, val] of Object.entries(v)) {
    const key = Buffer.from(k, 'utf8');
    const kl = Buffer.alloc(2);
    kl.writeUInt16BE(key.length);
    parts.push(kl, key, amf(val));
  }
  parts.push(Buffer.from([0, 0, 0x09]));
  return Buffer.concat(parts);
}

const CHUNK = 4096;

/** One RTMP message as type-0 chunk + type-3 continuations. */
function chunks(csid: number, type: number, streamId: number, timestamp: number, body: Buffer): Buffer {
  const out: Buffer[] = [];
  const h = Buffer.alloc(12);
  h[0] = csid & 0x3f; // fmt 0
  h.writeUIntBE(Math.min(timestamp, 0xffffff), 1, 3);
  h.writeUIntBE(body.length, 4, 3);
  h[7] = type;
  h.writeUInt32LE(streamId, 8);
  out.push(h);
  for (let o = 0; o < body.length; o += CHUNK) {
    if (o > 0) out.push(Buffer.from([0xc0 | (csid & 0x3f)]));
    out.push(body.subarray(o, o + CHUNK));
  }
  return Buffer.concat(out);
}

export interface ErtmpPublisher {
  /** Resolves when publishing finished (all packets sent) or failed. `status` is the last onStatus code seen. */
  done: Promise<{ ok: boolean; status: string; sent: number }>;
  stop(): void;
}

/**
 * Publishes `file`'s packets to `rtmpUrl` (`rtmp://host:port/live/<stream_id>`) with stream key
 * `key`, in real time, looping the file until `seconds` of audio were sent.
 */
export function publishOpus(rtmpUrl: string, key: string, file: OpusFile, seconds: number): ErtmpPublisher {
  const u = new URL(rtmpUrl);
  const app = u.pathname.replace(/^\//, '');
  const sock = net.connect(Number(u.port || 1935), u.hostname);
  let stopped = false;
  let status = '';
  let sent = 0;
  let resolveDone!: (v: { ok: boolean; status: string; sent: number }) => void;
  const done = new Promise<{ ok: boolean; status: string; sent: number }>((r) => (resolveDone = r));
  const finish = (ok: boolean) => {
    if (stopped) return;
    stopped = true;
    sock.end();
    resolveDone({ ok, status, sent });
  };
  sock.on('error', () => finish(false));
  sock.on('close', () => finish(false));

  let phase: 'handshake' | 'session' = 'handshake';
  let hs = Buffer.alloc(0);
  let text = '';
  const c1 = Buffer.concat([Buffer.alloc(8), randomBytes(1528)]);
  sock.on('connect', () => sock.write(Buffer.concat([Buffer.from([3]), c1])));
  sock.on('data', (d: Buffer) => {
    if (phase === 'handshake') {
      hs = Buffer.concat([hs, d]);
      if (hs.length < 1 + 1536 + 1536) return;
      const s1 = hs.subarray(1, 1537);
      phase = 'session';
      sock.write(s1); // C2 echoes S1
      start();
      d = hs.subarray(1 + 3072);
    }
    // Watching the replies as text is enough for a test client: onStatus codes are plain strings.
    text = (text + d.toString('latin1')).slice(-4096);
    const m = /NetStream\.Publish\.(Start|BadName|Rejected)/.exec(text);
    if (m && status !== m[0]) {
      status = m[0];
      if (m[1] === 'Start') sendAudio();
      else finish(false);
    }
  });

  function start() {
    const setChunk = Buffer.alloc(4);
    setChunk.writeUInt32BE(CHUNK);
    sock.write(chunks(2, 1, 0, 0, setChunk));
    sock.write(chunks(3, 20, 0, 0, Buffer.concat([amf('connect'), amf(1), amf({ app, type: 'nonprivate', flashVer: 'FMLE/3.0 (compatible; skylark-test)', tcUrl: rtmpUrl, fourCcList: ['Opus'] })])));
    sock.write(chunks(3, 20, 0, 0, Buffer.concat([amf('createStream'), amf(2), amf(null)])));
    sock.write(chunks(4, 20, 1, 0, Buffer.concat([amf('publish'), amf(3), amf(null), amf(key), amf('live')])));
  }

  function sendAudio() {
    const fourCc = Buffer.from('Opus', 'latin1');
    sock.write(chunks(6, 8, 1, 0, Buffer.concat([Buffer.from([0x90]), fourCc, file.head])));
    const t0 = performance.now();
    let ms = 0;
    let i = 0;
    const tick = () => {
      if (stopped) return;
      while (ms <= performance.now() - t0 + 60) {
        if (ms >= seconds * 1000) return finish(true);
        const p = file.packets[i++ % file.packets.length]!;
        sock.write(chunks(6, 8, 1, Math.round(ms), Buffer.concat([Buffer.from([0x91]), fourCc, p])));
        sent++;
        ms += opusPacketSamples(p) / 48;
      }
      setTimeout(tick, 20);
    };
    tick();
  }

  return { done, stop: () => finish(false) };
}
