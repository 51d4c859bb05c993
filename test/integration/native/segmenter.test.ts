// Segmenter with container 'ts' (the ingest's AAC → MPEG-TS path, expectCodec 'aac') fed the FLV
// fixtures' audio tags; its output checked by ffprobe/ffmpeg.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { Segmenter, type SegmenterEvent } from '../../../src/native/segmenter.js';

const fixtures = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../fixtures/aac');
const FIXTURE_48K = path.join(fixtures, 'sine48k_stereo_128k.flv');
const FIXTURE_44K = path.join(fixtures, 'sine44k1_mono_64k.flv');

interface Tag { timestamp: number; body: Buffer }

/** A tiny FLV reader: the audio tags (type 8) as (timestamp ms, AUDIODATA body). */
function readFlvAudio(file: string): Tag[] {
  const b = fs.readFileSync(file);
  if (b.toString('latin1', 0, 3) !== 'FLV') throw new Error(`${file} is not FLV`);
  const tags: Tag[] = [];
  let off = b.readUInt32BE(5) + 4;
  while (off + 11 <= b.length) {
    const type = b[off]!;
    const size = b.readUIntBE(off + 1, 3);
    const timestamp = (b.readUIntBE(off + 4, 3) | (b[off + 7]! << 24)) >>> 0;
    if (off + 11 + size > b.length) break;
    if (type === 8) tags.push({ timestamp, body: b.subarray(off + 11, off + 11 + size) });
    off += 11 + size + 4;
  }
  return tags;
}

type Seg = Extract<SegmenterEvent, { type: 'segment' }>;
const segmentsOf = (ev: SegmenterEvent[]): Seg[] => ev.filter((e): e is Seg => e.type === 'segment');

/** An AAC → MPEG-TS segmenter (target: the default 2000 ms when undefined). */
const tsSegmenter = (targetDurationMs?: number) => new Segmenter({ container: 'ts', expectCodec: 'aac', targetDurationMs });

function run(tags: Tag[], target?: number): SegmenterEvent[] {
  const s = tsSegmenter(target);
  const ev: SegmenterEvent[] = [];
  for (const t of tags) ev.push(...s.pushAudio(t.timestamp, t.body));
  ev.push(...s.flush());
  return ev;
}

function tool(cmd: string, args: string[]): { status: number | null; stdout: Buffer; stderr: string } {
  const r = spawnSync(cmd, args, { maxBuffer: 64 << 20 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr.toString() };
}

const tmpDirs: string[] = [];
afterAll(() => { for (const d of tmpDirs) fs.rmSync(d, { recursive: true, force: true }); });

/** Writes the segments and a VOD media playlist (RFC 8216 §4.3.3) into a temp dir. */
function writeHls(segs: Seg[]): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'skylark-seg-'));
  tmpDirs.push(dir);
  const target = Math.max(...segs.map((s) => Math.round(s.durationMs / 1000)));
  const lines = ['#EXTM3U', '#EXT-X-VERSION:3', `#EXT-X-TARGETDURATION:${target}`, `#EXT-X-MEDIA-SEQUENCE:${segs[0]!.sequence}`];
  for (const s of segs) {
    fs.writeFileSync(path.join(dir, `seg${s.sequence}.ts`), s.data);
    if (s.discontinuity) lines.push('#EXT-X-DISCONTINUITY');
    lines.push(`#EXTINF:${(s.durationMs / 1000).toFixed(6)},`, `seg${s.sequence}.ts`);
  }
  lines.push('#EXT-X-ENDLIST', '');
  fs.writeFileSync(path.join(dir, 'playlist.m3u8'), lines.join('\n'));
  return dir;
}

describe("Segmenter, container 'ts', AAC", () => {
  const tags48 = readFlvAudio(FIXTURE_48K);
  const events48 = run(tags48);
  const segs48 = segmentsOf(events48);
  const frames48 = tags48.filter((t) => t.body[1] === 1).length;

  it('emits the config once, then ~2 s segments with sequences from 0', () => {
    const configs = events48.filter((e) => e.type === 'config');
    expect(configs).toEqual([
      { type: 'config', codec: 'aac', codecs: 'mp4a.40.2', sampleRate: 48000, channels: 2, audioObjectType: 2 },
    ]);
    expect(events48.filter((e) => e.type === 'error')).toEqual([]);
    expect(segs48.length).toBe(Math.ceil(frames48 / 94));
    segs48.forEach((s, i) => {
      expect(s.sequence).toBe(i);
      expect(Buffer.isBuffer(s.data)).toBe(true);
      expect(s.data.length % 188).toBe(0);
      expect(s.discontinuity).toBe(false);
      if (i < segs48.length - 1) {
        expect(s.frames).toBe(94);
        expect(s.durationMs).toBeCloseTo((94 * 1024 * 1000) / 48000, 6);
        expect(Math.abs(s.durationMs - 2000)).toBeLessThanOrEqual(500);
      }
      if (i > 0) expect(s.pts90k).toBe(segs48[i - 1]!.pts90k + segs48[i - 1]!.frames * 1920);
    });
    expect(segs48.reduce((n, s) => n + s.frames, 0)).toBe(frames48);
  });

  it('writes audio-only MPEG-TS that ffprobe sees as exactly one AAC stream', () => {
    const dir = writeHls(segs48);
    const r = tool('ffprobe', ['-v', 'error', '-show_streams', '-show_format', '-of', 'json', path.join(dir, 'seg1.ts')]);
    expect(r.status).toBe(0);
    expect(r.stderr).toBe('');
    const info = JSON.parse(r.stdout.toString()) as {
      streams: { codec_type: string; codec_name: string; sample_rate: string; channels: number }[];
      format: { format_name: string; nb_streams: number };
    };
    expect(info.format.format_name).toBe('mpegts');
    expect(info.format.nb_streams).toBe(1);
    expect(info.streams).toHaveLength(1);
    expect(info.streams[0]).toMatchObject({ codec_type: 'audio', codec_name: 'aac', sample_rate: '48000', channels: 2 });
  });

  it('decodes the whole playlist with ffmpeg, without errors, at the source duration', () => {
    const dir = writeHls(segs48);
    const dec = tool('ffmpeg', ['-v', 'error', '-i', path.join(dir, 'playlist.m3u8'), '-f', 's16le', '-ac', '1', '-']);
    expect(dec.stderr).toBe('');
    expect(dec.status).toBe(0);
    const decodedSec = dec.stdout.length / 2 / 48000;
    const src = tool('ffprobe', ['-v', 'error', '-show_entries', 'format=duration', '-of', 'csv=p=0', FIXTURE_48K]);
    const sourceSec = Number(src.stdout.toString().trim());
    expect(Math.abs(decodedSec - sourceSec)).toBeLessThanOrEqual(0.1);
    expect(Math.abs(decodedSec - (frames48 * 1024) / 48000)).toBeLessThanOrEqual(0.1);
    const nul = tool('ffmpeg', ['-v', 'error', '-i', path.join(dir, 'playlist.m3u8'), '-f', 'null', '-']);
    expect(nul.status).toBe(0);
    expect(nul.stderr).toBe('');
  });

  it('keeps PTS continuous across segments (ffprobe -show_packets)', () => {
    const dir = writeHls(segs48);
    const pts: number[] = [];
    for (const s of segs48) {
      const r = tool('ffprobe', ['-v', 'error', '-show_entries', 'packet=pts', '-of', 'json', path.join(dir, `seg${s.sequence}.ts`)]);
      expect(r.status).toBe(0);
      const p = (JSON.parse(r.stdout.toString()) as { packets: { pts: number }[] }).packets.map((k) => k.pts);
      expect(p).toHaveLength(s.frames);
      expect(p[0]).toBe(s.pts90k % 2 ** 33);
      pts.push(...p);
    }
    expect(pts).toHaveLength(frames48);
    for (let i = 1; i < pts.length; i++) expect(pts[i]! - pts[i - 1]!).toBe(1920);
  });

  it('handles 44.1 kHz mono', () => {
    const ev = run(readFlvAudio(FIXTURE_44K));
    expect(ev[0]).toMatchObject({ type: 'config', codecs: 'mp4a.40.2', sampleRate: 44100, channels: 1 });
    const segs = segmentsOf(ev);
    for (const s of segs.slice(0, -1)) expect(Math.abs(s.durationMs - 2000)).toBeLessThanOrEqual(500);
    const dir = writeHls(segs);
    const dec = tool('ffmpeg', ['-v', 'error', '-i', path.join(dir, 'playlist.m3u8'), '-f', 's16le', '-']);
    expect(dec.status).toBe(0);
    expect(dec.stderr).toBe('');
    const frames = segs.reduce((n, s) => n + s.frames, 0);
    expect(dec.stdout.length / 2 / 44100).toBeCloseTo((frames * 1024) / 44100, 1);
  });

  it('cuts at the first frame boundary reaching targetDurationMs', () => {
    for (const target of [1000, 4000, 6000]) {
      const segs = segmentsOf(run(tags48, target));
      const full = Math.ceil((target * 48) / 1024);
      for (const s of segs.slice(0, -1)) expect(s.frames).toBe(full);
    }
  });

  it('flush ends the open segment; discontinuity flags the next one and PTS carry on', () => {
    const s = tsSegmenter();
    const ev: SegmenterEvent[] = [];
    const first = tags48.slice(0, 150);
    for (const t of first) ev.push(...s.pushAudio(t.timestamp, t.body));
    ev.push(...s.flush());
    expect(s.flush()).toEqual([]);
    s.discontinuity();
    // Reconnected publisher: clock from 0 again, sequence header again.
    for (const t of first) ev.push(...s.pushAudio(t.timestamp, t.body));
    ev.push(...s.flush());
    const segs = segmentsOf(ev);
    expect(segs.map((g) => g.frames)).toEqual([94, 55, 94, 55]);
    expect(segs.map((g) => g.discontinuity)).toEqual([false, false, true, false]);
    expect(segs.map((g) => g.sequence)).toEqual([0, 1, 2, 3]);
    for (let i = 1; i < segs.length; i++) expect(segs[i]!.pts90k).toBe(segs[i - 1]!.pts90k + segs[i - 1]!.frames * 1920);
    expect(ev.filter((e) => e.type === 'config')).toHaveLength(1);
    const dir = writeHls(segs);
    const dec = tool('ffmpeg', ['-v', 'error', '-i', path.join(dir, 'playlist.m3u8'), '-f', 'null', '-']);
    expect(dec.status).toBe(0);
    expect(dec.stderr).toBe('');
  });

  it('reports media problems as error events and goes on', () => {
    const s = tsSegmenter();
    const raw = tags48.find((t) => t.body[1] === 1)!;
    const seq = tags48.find((t) => t.body[1] === 0)!;
    expect(s.pushAudio(0, raw.body)).toEqual([
      { type: 'error', code: 'audio_before_sequence_header', message: expect.any(String) },
    ]);
    expect(s.pushAudio(0, Buffer.from([0xaf, 0x00, 0x11]))).toEqual([
      { type: 'error', code: 'bad_audio_specific_config', message: expect.any(String) },
    ]);
    expect(s.pushAudio(0, Buffer.from([0x2f, 0xff, 0xfb, 0x90, 0x00]))).toEqual([
      { type: 'error', code: 'codec_mismatch', message: expect.stringContaining('mp3'), expected: 'aac', received: 'mp3' },
    ]);
    expect(new Segmenter({ container: 'ts' }).pushAudio(0, Buffer.from([0x3f, 0x00, 0x00]))).toEqual([
      { type: 'error', code: 'unsupported_codec', message: expect.stringContaining('SoundFormat 3') },
    ]);
    expect(s.pushAudio(0, new Uint8Array(0))).toEqual([
      { type: 'error', code: 'invalid_audio_tag', message: expect.any(String) },
    ]);
    expect(s.pushAudio(0, seq.body)[0]).toMatchObject({ type: 'config', codecs: 'mp4a.40.2' });
    expect(s.pushAudio(0, raw.body)).toEqual([]);
    const segs = segmentsOf(s.flush());
    expect(segs).toHaveLength(1);
    expect(segs[0]!.frames).toBe(1);
  });

  it('throws TypeError for wrong arguments', () => {
    const s = tsSegmenter();
    expect(() => s.pushAudio('0' as unknown as number, new Uint8Array(1))).toThrow(TypeError);
    expect(() => s.pushAudio(0, 'x' as unknown as Uint8Array)).toThrow(TypeError);
    expect(() => s.pushAudio(0, new Uint16Array(2) as unknown as Uint8Array)).toThrow(TypeError);
    expect(() => tsSegmenter(0)).toThrow(TypeError);
    expect(() => tsSegmenter('x' as unknown as number)).toThrow(TypeError);
  });
});
