/**
 * Episode audio at `/media/…` (docs/behaviour.md §5): HEAD, `Accept-Ranges`, single byte ranges checked
 * against `curl -r` (206 + `Content-Range`, 416), ETag/304, If-Range, a slow reader (uWS
 * backpressure), drafts → 404; and the streamed upload's cap on bodies without Content-Length.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile, execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import http from 'node:http';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { api, startInProcess, type TestServer } from '../../helpers/server.js';
import { ffmpegPath } from '../../helpers/ffmpeg.js';

const run = promisify(execFile);
const LIMIT = 4 * 1024 * 1024;
let s: TestServer;
let key: string;
let wav: Buffer;
let url: string;
let draftUrl: string;

function makeAudio(dir: string, file: string, seconds: number, args: string[]): Buffer {
  const out = path.join(dir, file);
  execFileSync(ffmpegPath(), ['-hide_banner', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', `sine=frequency=440:duration=${seconds}`, ...args, out], { timeout: 30_000 });
  return readFileSync(out);
}

/** curl (asynchronously: the server runs in this process). Body bytes, status and headers. */
async function curl(args: string[]): Promise<{ status: number; headers: string; body: Buffer }> {
  const out = path.join(s.dataDir, `curl-${Math.random().toString(36).slice(2)}.bin`);
  const hdr = `${out}.h`;
  const { stdout } = await run('curl', ['-s', '-o', out, '-D', hdr, '-w', '%{http_code}', '--max-time', '20', ...args], { encoding: 'utf8' });
  return { status: Number(stdout.trim()), headers: readFileSync(hdr, 'utf8'), body: readFileSync(out) };
}

const header = (raw: string, name: string) => new RegExp(`^${name}:\\s*(.*?)\\r?$`, 'im').exec(raw)?.[1];

/** Raw request through node:http (chunked bodies, paused readers). */
function request(method: string, target: string, headers: Record<string, string>, body?: (req: http.ClientRequest) => void): Promise<http.IncomingMessage> {
  return new Promise((resolve, reject) => {
    const u = new URL(target);
    const req = http.request({ host: u.hostname, port: u.port, method, path: u.pathname, headers, agent: false }, resolve);
    req.on('error', reject);
    if (body) body(req);
    else req.end();
  });
}

beforeAll(async () => {
  s = await startInProcess({ SKYLARK_MAX_UPLOAD_BYTES: String(LIMIT) });
  key = s.secretKey;
  // ~2.9 MB of 16-bit stereo WAV: large enough that a response spans many socket writes.
  wav = makeAudio(s.dataDir, 'tone.wav', 15, ['-ac', '2', '-ar', '48000', '-c:a', 'pcm_s16le']);
  const pid = (await api(s.http, key, 'POST', '/v2/podcasts', { title: 'Audio show' })).json.id;
  const ep = (await api(s.http, key, 'POST', `/v2/podcasts/${pid}/episodes`, { title: 'Long' })).json;
  // Upload with Transfer-Encoding: chunked in 64 KiB pieces (no Content-Length).
  const res = await request('PUT', `${s.http}/v2/podcasts/${pid}/episodes/${ep.id}/audio`, { Authorization: `Bearer ${key}`, 'Content-Type': 'audio/wav' }, (req) => {
    for (let i = 0; i < wav.length; i += 65536) req.write(wav.subarray(i, i + 65536));
    req.end();
  });
  let text = '';
  for await (const d of res) text += d;
  expect(res.statusCode, text).toBe(200);
  const up = JSON.parse(text);
  expect(up.audio).toMatchObject({ mimeType: 'audio/wav', sizeBytes: wav.length });
  expect(up.audio.durationSeconds).toBeGreaterThan(14);
  expect((await api(s.http, key, 'POST', `/v2/podcasts/${pid}/publish`, { episodeId: ep.id })).status).toBe(200);
  url = up.audioUrl;
  const d = (await api(s.http, key, 'POST', `/v2/podcasts/${pid}/episodes`, { title: 'Draft' })).json;
  const dr = await fetch(`${s.http}/v2/podcasts/${pid}/episodes/${d.id}/audio`, { method: 'PUT', headers: { Authorization: `Bearer ${key}` }, body: wav.subarray(0, 200_000) });
  draftUrl = ((await dr.json()) as any).audioUrl;
});
afterAll(async () => {
  await s?.close();
});

describe('episode audio', () => {
  it('answers HEAD with the GET headers and no body', async () => {
    const r = await curl(['-I', url]);
    expect(r.status).toBe(200);
    expect(header(r.headers, 'content-length')).toBe(String(wav.length));
    expect(header(r.headers, 'accept-ranges')).toBe('bytes');
    expect(header(r.headers, 'content-type')).toBe('audio/wav');
    expect(header(r.headers, 'etag')).toMatch(/^"[^"]+"$/);
    expect(header(r.headers, 'last-modified')).toBeTruthy();
    const h = await fetch(url, { method: 'HEAD' });
    expect(h.status).toBe(200);
    expect((await h.arrayBuffer()).byteLength).toBe(0);
    expect(h.headers.get('content-length')).toBe(String(wav.length));
  });

  it('serves the whole file and single byte ranges exactly as curl -r asks', async () => {
    const full = await curl([url]);
    expect(full.status).toBe(200);
    expect(createHash('sha256').update(full.body).digest('hex')).toBe(createHash('sha256').update(wav).digest('hex'));
    const n = wav.length;
    for (const [range, start, end] of [
      ['0-99', 0, 99],
      ['1000-1000', 1000, 1000],
      [`100000-`, 100000, n - 1],
      ['-500', n - 500, n - 1],
      [`${n - 10}-${n + 1000}`, n - 10, n - 1],
    ] as const) {
      const r = await curl(['-r', range, url]);
      expect(r.status, range).toBe(206);
      expect(header(r.headers, 'content-range'), range).toBe(`bytes ${start}-${end}/${n}`);
      expect(header(r.headers, 'content-length'), range).toBe(String(end - start + 1));
      expect(r.body.equals(wav.subarray(start, end + 1)), range).toBe(true);
    }
    const bad = await curl(['-r', `${n}-${n + 10}`, url]);
    expect(bad.status).toBe(416);
    expect(header(bad.headers, 'content-range')).toBe(`bytes */${n}`);
    // several ranges: served whole (we answer single ranges only)
    const multi = await curl(['-r', '0-9,100-109', url]);
    expect(multi.status).toBe(200);
    expect(multi.body.length).toBe(n);
  });

  it('honours If-None-Match (304) and If-Range (stale → whole file)', async () => {
    const h = await fetch(url, { method: 'HEAD' });
    const etag = h.headers.get('etag')!;
    const nm = await fetch(url, { headers: { 'If-None-Match': etag } });
    expect(nm.status).toBe(304);
    const ok = await fetch(url, { headers: { Range: 'bytes=0-9', 'If-Range': etag } });
    expect(ok.status).toBe(206);
    expect(Buffer.from(await ok.arrayBuffer()).equals(wav.subarray(0, 10))).toBe(true);
    const stale = await fetch(url, { headers: { Range: 'bytes=0-9', 'If-Range': '"old"' } });
    expect(stale.status).toBe(200);
    expect((await stale.arrayBuffer()).byteLength).toBe(wav.length);
  });

  it('keeps a slow reader correct (the server waits on backpressure, then finishes)', async () => {
    const res = await request('GET', url, {});
    expect(res.statusCode).toBe(200);
    const chunks: Buffer[] = [];
    let paused = false;
    await new Promise<void>((resolve, reject) => {
      res.on('data', (d: Buffer) => {
        chunks.push(d);
        if (!paused) {
          paused = true;
          res.pause();
          setTimeout(() => res.resume(), 300);
        }
      });
      res.on('end', resolve);
      res.on('error', reject);
    });
    expect(Buffer.concat(chunks).equals(wav)).toBe(true);
  });

  it('keeps audio of unpublished episodes private (404) and refuses bad names', async () => {
    expect(draftUrl).toMatch(/\/media\//);
    expect((await fetch(draftUrl)).status).toBe(404);
    expect((await fetch(url.replace(/\.wav$/, '.mp3'))).status).toBe(404);
    expect((await fetch(`${s.http}/media/pod_x/..%2Fskylark.db`)).status).toBe(404);
  });

  it('caps uploads without Content-Length while streaming (413) and leaves no temporary file', async () => {
    const pid = (await api(s.http, key, 'POST', '/v2/podcasts', { title: 'Cap' })).json.id;
    const ep = (await api(s.http, key, 'POST', `/v2/podcasts/${pid}/episodes`, { title: 'Too big' })).json;
    const res = await request('PUT', `${s.http}/v2/podcasts/${pid}/episodes/${ep.id}/audio`, { Authorization: `Bearer ${key}`, 'Content-Type': 'audio/wav' }, (req) => {
      req.on('error', () => {}); // the server may close while we write
      const piece = Buffer.alloc(256 * 1024, 3);
      let sent = 0;
      const pump = () => {
        while (sent < LIMIT + 2 * piece.length) {
          sent += piece.length;
          if (!req.write(piece)) return req.once('drain', pump);
        }
        req.end();
      };
      pump();
    });
    let text = '';
    for await (const d of res) text += d;
    expect(res.statusCode, text).toBe(413);
    expect(JSON.parse(text).error.code).toBe('body_too_large');
    const { readdirSync } = await import('node:fs');
    expect(readdirSync(path.join(s.dataDir, 'media', '.tmp'))).toEqual([]);
    expect((await api(s.http, key, 'GET', `/v2/podcasts/${pid}/episodes/${ep.id}`)).json.audio).toBeNull();
  });
});
