/**
 * RTMP bytes parsed per second by the native core (RtmpSession): a long synthetic publish — the
 * recorded FFmpeg fixture's AAC audio bodies re-chunked as FFmpeg does (chunk size 4096, type-1
 * headers with timestamp deltas on csid 4), ~4 MB per session — through a fresh session each round
 * (handshake, connect, publish, accept included), driven the way src/ingest/rtmp-server.ts does:
 * `pushTo(read, handler)`, the handler touching each audio body, then `takeOutput()` when
 * `hasOutput`. Two read patterns: 64 KiB socket-sized reads (many messages per read), and one
 * message per read (what a live publisher looks like: one read per ~21 ms AAC frame), where the
 * per-call cost dominates. `npx tsx bench/rtmp-parse.bench.ts` prints the rows.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Bench } from 'tinybench';
import { RtmpSession, type RtmpHandler } from '../src/native/index.js';
import type { BenchRow } from './lib/report.js';

const FIXTURE = path.resolve(import.meta.dirname, '..', 'test', 'fixtures', 'rtmp', 'ffmpeg-aac-48k.bin');
const TARGET_BYTES = 4 * 1024 * 1024;
const READ_SIZE = 64 * 1024;

/** The fixture's handshake + commands up to and including publish, and its audio bodies. */
function fromFixture(): { preamble: Buffer; bodies: Buffer[] } {
  const bytes = readFileSync(FIXTURE);
  const s = new RtmpSession();
  let preambleEnd = 0;
  const bodies: Buffer[] = [];
  for (let i = 0; i < bytes.length; i++) {
    for (const ev of s.push(bytes.subarray(i, i + 1))) {
      if (ev.type === 'publish' && preambleEnd === 0) preambleEnd = i + 1;
      if (ev.type === 'audio') bodies.push(Buffer.from(ev.data));
    }
  }
  return { preamble: bytes.subarray(0, preambleEnd), bodies };
}

/** Audio messages chunked at 4096 on csid 4, message stream 1: a type-0 header, then type-1
 *  headers (21 ms deltas), type-3 continuation chunks; preceded by Set Chunk Size 4096. */
function audioStream(bodies: Buffer[], targetBytes: number): Buffer {
  const chunk = 4096;
  const parts: Buffer[] = [Buffer.from([0x02, 0, 0, 0, 0, 0, 4, 1, 0, 0, 0, 0, 0, 0, 0x10, 0])];
  let total = 0;
  for (let n = 0; total < targetBytes; n++) {
    const body = bodies[n === 0 ? 0 : 1 + ((n - 1) % (bodies.length - 1))]!;
    const h = Buffer.alloc(n === 0 ? 12 : 8);
    h[0] = n === 0 ? 0x04 : 0x44;
    h.writeUIntBE(n === 0 ? 0 : 21, 1, 3);
    h.writeUIntBE(body.length, 4, 3);
    h[7] = 8;
    if (n === 0) h.writeUInt32LE(1, 8);
    parts.push(h);
    for (let off = 0; off < body.length; off += chunk) {
      if (off > 0) parts.push(Buffer.from([0xc4]));
      parts.push(body.subarray(off, off + chunk));
    }
    total += h.length + body.length;
  }
  return Buffer.concat(parts);
}

/** The chunked audio stream cut into reads: fixed-size, or one whole message per read. */
function cut(stream: Buffer, readSize: number | 'message'): Buffer[] {
  const reads: Buffer[] = [];
  if (readSize !== 'message') {
    for (let off = 0; off < stream.length; off += readSize) reads.push(stream.subarray(off, off + readSize));
    return reads;
  }
  // Set Chunk Size (16 bytes), then per message: a 12- or 8-byte header and its body (< 4096 bytes).
  reads.push(stream.subarray(0, 16));
  for (let off = 16; off < stream.length; ) {
    const h = (stream[off]! >> 6) === 0 ? 12 : 8;
    const len = stream.readUIntBE(off + 4, 3);
    reads.push(stream.subarray(off, off + h + len));
    off += h + len;
  }
  return reads;
}

async function measure(name: string, preamble: Buffer, stream: Buffer, readSize: number | 'message'): Promise<BenchRow> {
  const reads = cut(stream, readSize);
  const perRound = preamble.length + stream.length;
  let audioEvents = 0;
  let checksum = 0;
  let rounds = 0;
  let session: RtmpSession;
  const handler: RtmpHandler = {
    audio: (_ts, data) => {
      audioEvents++;
      checksum += data[data.length - 1]!;
    },
    event: (e) => {
      if (e.type === 'publish') session.acceptPublish();
      else if (e.type === 'error') throw new Error(`${e.code}: ${e.message}`);
    },
  };

  const bench = new Bench({ time: 2000, warmupTime: 300 });
  bench.add(name, () => {
    const s = (session = new RtmpSession());
    s.pushTo(preamble, handler);
    s.takeOutput();
    for (const r of reads) {
      s.pushTo(r, handler);
      if (s.hasOutput) s.takeOutput();
    }
    rounds++;
  });
  await bench.run();
  const r = bench.tasks[0]!.result;
  if (r.state !== 'completed') throw new Error(`bench ${r.state}`);
  if (checksum === 0) throw new Error('no audio');
  const roundsPerSec = r.throughput.mean;
  const messages = audioEvents / rounds;
  const mbPerSec = (roundsPerSec * perRound) / 1e6;
  const messagesPerSec = Math.round(roundsPerSec * messages);
  return {
    group: 'ingest',
    name,
    value: Number(mbPerSec.toFixed(1)),
    unit: 'MB/s',
    note: `${messagesPerSec} audio messages/s (${(1e6 / messagesPerSec).toFixed(2)} µs each); ${(perRound / 1e6).toFixed(1)} MB per session in ${
      readSize === 'message' ? 'one read per message' : `${readSize / 1024} KiB reads`
    } (${reads.length} reads), events included`,
  };
}

export async function run(): Promise<BenchRow[]> {
  const { preamble, bodies } = fromFixture();
  const stream = audioStream(bodies, TARGET_BYTES);
  return [
    await measure('RTMP bytes parsed (native core)', preamble, stream, READ_SIZE),
    await measure('RTMP parse, one message per read', preamble, stream, 'message'),
  ];
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  for (const row of await run()) console.log(`${row.group} | ${row.name}: ${row.value} ${row.unit} (${row.note})`);
}
