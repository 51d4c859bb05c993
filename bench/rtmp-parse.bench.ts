/**
 * RTMP bytes parsed per second, on a long synthetic publish: the recorded FFmpeg fixture's AAC
 * audio bodies re-chunked as FFmpeg does (chunk size 4096, type-1 headers with 21 ms timestamp
 * deltas on csid 4), ~4 MB per session, through a fresh session each round (handshake, connect,
 * publish, accept included).
 *
 * 1. The native core alone (`bench/native/rtmp_parse_bench.cc`, built here with CMake in Release
 *    into .build/native-bench): the session driven as the I/O layer (native/io) drives it, in
 *    64 KiB socket-sized reads and in one read per message (a live publisher: one read per ~21 ms
 *    AAC frame), events drained and each audio body touched. No JS, no socket.
 * 2. The whole ingest read path over loopback: an `RtmpListener` on 127.0.0.1 and one client
 *    socket in this process writing the same bytes — kernel TCP, the native reads, the session,
 *    and the READ batches into JS (every audio message to the handler, which touches each body),
 *    or routed into a native Segmenter (container 'ts', JS hears only segments).
 *
 * `npx tsx bench/rtmp-parse.bench.ts` prints the rows.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { RtmpListener, type RtmpConnectionHandler } from '../src/native/rtmp-listener.js';
import { Segmenter, type SegmenterEvent } from '../src/native/segmenter.js';
import { commandName, publishedAudio, readMessages } from '../test/helpers/rtmp-messages.js';
import type { BenchRow } from './lib/report.js';

const root = path.resolve(import.meta.dirname, '..');
const FIXTURE = path.join(root, 'test', 'fixtures', 'rtmp', 'ffmpeg-aac-48k.bin');
const TARGET_BYTES = 4 * 1024 * 1024;
const SECONDS = 2;

/** What one row of the C++ bench prints. */
interface NativeResult {
  name: string;
  reads: number;
  bytesPerRound: number;
  rounds: number;
  seconds: number;
  mbPerSec: number;
  messagesPerSec: number;
}

/** Builds bench/native/rtmp_parse_bench.cc (Release) and runs it on the fixture. */
function runNative(): NativeResult[] {
  const dir = path.join(root, '.build', 'native-bench');
  const quiet = { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] as ['ignore', 'ignore', 'inherit'] };
  execFileSync('cmake', ['-S', 'native', '-B', dir, '-DSKYLARK_BENCH=ON', '-DCMAKE_BUILD_TYPE=Release'], quiet);
  execFileSync('cmake', ['--build', dir, '--target', 'rtmp_parse_bench', '-j', '2'], quiet);
  const out = execFileSync(path.join(dir, 'rtmp_parse_bench'), [FIXTURE, String(SECONDS)], { encoding: 'utf8' });
  return out.trim().split('\n').map((line) => JSON.parse(line) as NativeResult);
}

/** The fixture's bytes up to and including its publish command, and its audio bodies (read by the
 *  test suite's reference chunk reader). */
function fromFixture(): { preamble: Buffer; bodies: Buffer[] } {
  const bytes = readFileSync(FIXTURE);
  const publish = readMessages(bytes).find((m) => commandName(m) === 'publish')!;
  return { preamble: bytes.subarray(0, publish.end), bodies: publishedAudio(bytes).map((m) => m.body) };
}

/** Set Chunk Size 4096, then the audio messages (as bench/native/rtmp_parse_bench.cc builds them). */
function audioStream(bodies: Buffer[]): { stream: Buffer; messages: number } {
  const chunk = 4096;
  const parts: Buffer[] = [Buffer.from([0x02, 0, 0, 0, 0, 0, 4, 1, 0, 0, 0, 0, 0, 0, 0x10, 0])];
  let total = 0;
  let n = 0;
  for (; total < TARGET_BYTES; n++) {
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
  return { stream: Buffer.concat(parts), messages: n };
}

/**
 * Rounds of one connection to an RtmpListener on loopback writing `bytes` and then its FIN (the
 * publish accepted on its event; `routed`: then routed into a TS Segmenter), each until the
 * server has read it all (the peer's close comes after its last byte); for SECONDS after one
 * warm-up round. Returns the audio messages JS heard and the segments made, per round.
 */
async function measureListener(bytes: Buffer, routed: boolean) {
  let audio = 0;
  let segments = 0;
  let checksum = 0;
  let closed: () => void = () => {};
  const listener = new RtmpListener({}, (conn) => {
    const segmenter = new Segmenter({ container: 'ts', targetDurationMs: 2000, expectCodec: 'aac' });
    const onEvents = (events: SegmenterEvent[]) => {
      for (const e of events) if (e.type === 'segment') segments++;
    };
    const handler: RtmpConnectionHandler = {
      audio: (ts, data, segmented) => {
        audio++;
        checksum += data[data.length - 1]!;
        // Read before the route (the sequence header and the frames of the publish's read): to
        // the segmenter from JS, as ingest does.
        if (routed && !segmented) onEvents(segmenter.pushAudio(ts, data));
      },
      event: (e) => {
        if (e.type === 'error') throw new Error(`${e.code}: ${e.message}`);
        if (e.type !== 'publish') return;
        conn.acceptPublish();
        if (routed) conn.route({ segmenter, onEvents }, false);
      },
      timeout: () => {},
      closed: () => {
        for (const e of segmenter.flush()) if (e.type === 'segment') segments++;
        closed();
      },
    };
    return handler;
  });
  const port = listener.listen('127.0.0.1', 0);
  const round = async () => {
    const socket = net.connect({ host: '127.0.0.1', port });
    socket.on('error', () => {});
    socket.resume(); // the replies
    const done = new Promise<void>((resolve) => (closed = resolve));
    socket.end(bytes);
    await done;
    socket.destroy();
  };
  await round();
  audio = segments = 0;
  let rounds = 0;
  const t0 = performance.now();
  let elapsed = 0;
  while (elapsed < SECONDS * 1000) {
    await round();
    rounds++;
    elapsed = performance.now() - t0;
  }
  listener.close();
  if (checksum === 0) throw new Error('no audio');
  return { rounds, seconds: elapsed / 1000, audioPerRound: audio / rounds, segmentsPerRound: segments / rounds };
}

export async function run(): Promise<BenchRow[]> {
  const rows: BenchRow[] = [];
  for (const r of runNative()) {
    rows.push({
      group: 'ingest',
      name: r.name === '64 KiB reads' ? 'RTMP bytes parsed (native core)' : 'RTMP parse, one message per read',
      value: r.mbPerSec,
      unit: 'MB/s',
      note: `${Math.round(r.messagesPerSec)} audio messages/s (${(1e6 / r.messagesPerSec).toFixed(2)} µs each); ${(r.bytesPerRound / 1e6).toFixed(1)} MB per session in ${r.name} (${r.reads} reads), C++ only (bench/native/rtmp_parse_bench.cc), events drained`,
    });
  }
  const { preamble, bodies } = fromFixture();
  const { stream, messages } = audioStream(bodies);
  const bytes = Buffer.concat([preamble, stream]);
  for (const routed of [false, true]) {
    const m = await measureListener(bytes, routed);
    if (!routed && m.audioPerRound !== messages) throw new Error(`heard ${m.audioPerRound} of ${messages} audio messages per round`);
    const mbPerSec = (bytes.length * m.rounds) / m.seconds / 1e6;
    const perSec = (messages * m.rounds) / m.seconds;
    rows.push({
      group: 'ingest',
      name: routed ? 'RTMP ingest over loopback, routed to a TS segmenter' : 'RTMP ingest over loopback, every message to JS',
      value: Number(mbPerSec.toFixed(1)),
      unit: 'MB/s',
      note: `${Math.round(perSec)} audio messages/s (${(1e6 / perSec).toFixed(2)} µs each); RtmpListener on 127.0.0.1, one in-process client writing ${(bytes.length / 1e6).toFixed(1)} MB per connection${
        routed ? `, ${Math.round(m.segmentsPerRound)} TS segments made per connection` : ''
      }`,
    });
  }
  return rows;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  for (const row of await run()) console.log(`${row.group} | ${row.name}: ${row.value} ${row.unit} (${row.note})`);
}
