/**
 * The native segmenters fed recorded audio tags in a loop, as one continuous stream (timestamps keep
 * running): AAC → MPEG-TS (container 'ts', as ingest runs it), AAC → fMP4 with 500 ms LL-HLS parts,
 * and Opus (E-RTMP tags built from the Ogg Opus fixture) → fMP4 with and without parts. Segments and parts
 * produced per second and MB/s of FLV audio in. Includes the JS → native calls and the event objects,
 * i.e. what the ingest path pays per stream layer. `npx tsx bench/segmenter.bench.ts` prints the rows.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Bench } from 'tinybench';
import { Segmenter, type SegmenterOptions } from '../src/native/segmenter.js';
import { opusTagsFromOgg, type Tag } from '../test/helpers/ogg.js';
import type { BenchRow } from './lib/report.js';

const FIXTURES = path.resolve(import.meta.dirname, '..', 'test', 'fixtures');
const AAC = path.join(FIXTURES, 'aac', 'sine48k_stereo_128k.flv');
const OPUS = path.join(FIXTURES, 'opus', 'sine48k_stereo_128k.ogg');

/** The FLV's audio tags as (timestamp ms, AUDIODATA body). */
function readFlvAudio(file: string): Tag[] {
  const b = readFileSync(file);
  const tags: Tag[] = [];
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

interface Seg { pushAudio(t: number, d: Uint8Array): { type: string }[] }

interface Case {
  name: string;
  make: () => Seg;
  header: Tag;
  frames: Tag[];
  frameMs: number;
}

/** Loops `c.frames` through one segmenter for ~2 s; returns segments/s, parts/s and MB/s. */
async function measure(c: Case): Promise<{ segments: number; parts: number; mbps: number }> {
  const span = c.frames[c.frames.length - 1]!.timestamp - c.frames[0]!.timestamp + c.frameMs; // ms per loop
  const bytesPerLoop = c.frames.reduce((n, t) => n + t.body.length, 0);
  const seg = c.make();
  seg.pushAudio(0, c.header.body);
  let offset = 0;
  let segments = 0;
  let parts = 0;
  let loops = 0;
  const bench = new Bench({ time: 2000, warmupTime: 300 });
  bench.add(c.name, () => {
    for (const t of c.frames) {
      for (const e of seg.pushAudio(offset + t.timestamp, t.body)) {
        if (e.type === 'segment') segments++;
        else if (e.type === 'part') parts++;
      }
    }
    offset += span;
    loops++;
  });
  await bench.run();
  const r = bench.tasks[0]!.result;
  if (r.state !== 'completed') throw new Error(`bench ${r.state}`);
  const loopsPerSec = r.throughput.mean;
  return {
    segments: Math.round((loopsPerSec * segments) / loops),
    parts: Math.round((loopsPerSec * parts) / loops),
    mbps: (loopsPerSec * bytesPerLoop) / 1e6,
  };
}

export async function run(): Promise<BenchRow[]> {
  const aac = readFlvAudio(AAC);
  const aacCase = { header: aac.find((t) => t.body[1] === 0)!, frames: aac.filter((t) => t.body[1] === 1), frameMs: 21 };
  const opus = opusTagsFromOgg(readFileSync(OPUS)).tags;
  const opusCase = { header: opus[0]!, frames: opus.slice(1), frameMs: 20 };
  const fmp4 = (o: Partial<SegmenterOptions>) => () => new Segmenter({ container: 'fmp4', targetDurationMs: 2000, ...o });
  const cases: Array<Case & { label: string; withParts: boolean }> = [
    { name: 'ts-aac', label: 'HLS segments produced (native, 2 s AAC 128 kbps)', withParts: false,
      make: () => new Segmenter({ container: 'ts', targetDurationMs: 2000, expectCodec: 'aac' }), ...aacCase },
    { name: 'fmp4-aac-parts', label: 'fMP4 AAC 128 kbps, 2 s segments + 500 ms parts', withParts: true,
      make: fmp4({ partTargetMs: 500 }), ...aacCase },
    { name: 'fmp4-opus', label: 'fMP4 Opus 128 kbps, 2 s segments', withParts: false,
      make: fmp4({ expectCodec: 'opus' }), ...opusCase },
    { name: 'fmp4-opus-parts', label: 'fMP4 Opus 128 kbps, 2 s segments + 500 ms parts', withParts: true,
      make: fmp4({ expectCodec: 'opus', partTargetMs: 500 }), ...opusCase },
  ];
  const rows: BenchRow[] = [];
  for (const c of cases) {
    const m = await measure(c);
    const note = `${m.mbps.toFixed(1)} MB/s of FLV audio in; ${c.frames.length} tags per loop`;
    rows.push({ group: 'ingest', name: c.label, value: m.segments, unit: 'segments/s', note });
    if (c.withParts) rows.push({ group: 'ingest', name: `${c.label} (parts)`, value: m.parts, unit: 'parts/s', note });
  }
  return rows;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  for (const row of await run()) console.log(`${row.group} | ${row.name}: ${row.value} ${row.unit} (${row.note})`);
}
