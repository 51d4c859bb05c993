/**
 * The native AAC → MPEG-TS segmenter (TsSegmenter) fed the 48 kHz stereo 128 kbps fixture's audio
 * tags in a loop, as one continuous stream (timestamps keep running): HLS segments produced per
 * second and MB/s of FLV audio in. Includes the JS → native calls and the event objects, i.e.
 * what the ingest path pays per stream. `npx tsx bench/segmenter.bench.ts` prints the rows.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Bench } from 'tinybench';
import { TsSegmenter } from '../src/native/index.js';
import type { BenchRow } from './lib/report.js';

const FIXTURE = path.resolve(import.meta.dirname, '..', 'test', 'fixtures', 'aac', 'sine48k_stereo_128k.flv');

/** The FLV's audio tags as (timestamp ms, AUDIODATA body). */
function readFlvAudio(file: string): { timestamp: number; body: Buffer }[] {
  const b = readFileSync(file);
  const tags: { timestamp: number; body: Buffer }[] = [];
  let off = b.readUInt32BE(5) + 4;
  while (off + 11 <= b.length) {
    const size = b.readUIntBE(off + 1, 3);
    const timestamp = (b.readUIntBE(off + 4, 3) | (b[off + 7]! << 24)) >>> 0;
    if (off + 11 + size > b.length) break;
    if (b[off] === 8) tags.push({ timestamp, body: b.subarray(off + 11, off + 11 + size) });
    off += 11 + size + 4;
  }
  return tags;
}

export async function run(): Promise<BenchRow[]> {
  const tags = readFlvAudio(FIXTURE);
  const header = tags.find((t) => t.body[1] === 0)!;
  const frames = tags.filter((t) => t.body[1] === 1);
  const span = frames[frames.length - 1]!.timestamp - frames[0]!.timestamp + 21; // ms per loop
  const bytesPerLoop = frames.reduce((n, t) => n + t.body.length, 0);

  const seg = new TsSegmenter({ targetDurationMs: 2000 });
  seg.pushAudio(0, header.body);
  let offset = 0;
  let segments = 0;
  let loops = 0;
  const bench = new Bench({ time: 2000, warmupTime: 300 });
  bench.add('segmenter', () => {
    for (const t of frames) {
      const ev = seg.pushAudio(offset + t.timestamp, t.body);
      for (const e of ev) if (e.type === 'segment') segments++;
    }
    offset += span;
    loops++;
  });
  await bench.run();
  const r = bench.tasks[0]!.result;
  if (r.state !== 'completed') throw new Error(`bench ${r.state}`);
  const loopsPerSec = r.throughput.mean;
  const segmentsPerLoop = segments / loops;
  return [
    {
      group: 'ingest',
      name: 'HLS segments produced (native, 2 s AAC 128 kbps)',
      value: Math.round(loopsPerSec * segmentsPerLoop),
      unit: 'segments/s',
      note: `${((loopsPerSec * bytesPerLoop) / 1e6).toFixed(1)} MB/s of FLV audio in; ${frames.length} tags per loop`,
    },
  ];
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  for (const row of await run()) console.log(`${row.group} | ${row.name}: ${row.value} ${row.unit} (${row.note})`);
}
