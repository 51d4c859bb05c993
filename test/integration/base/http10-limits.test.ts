/**
 * The HTTP/1.0 front's limits (docs/behaviour.md §13, docs/http.md "HTTP/1.0"): a request head not
 * complete in time and an idle kept-alive connection are closed, HTTP/1.0 connections from one
 * address are capped as progressive listeners are, and none of it touches a long answer or a slow
 * upload. Raw `net` clients against a real server; a real FFmpeg publisher; and `skylark serve`
 * under a 400-descriptor limit (`prlimit`), where 380 half-sent heads from one address used to take
 * every descriptor (the HTTP/1.1 API then timed out and the accept loop spun).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import net from 'node:net';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { api, repoRoot, startInProcess, tempDir, testHttpThreads, waitFor, type TestServer } from '../../helpers/server.js';
import { exited, publish } from '../../helpers/publish.js';

const HEAD_MS = 4000;
const IDLE_MS = 1500;
const PER_IP = 50;

let t: TestServer;
let port = 0;
const children: ChildProcess[] = [];

/** A raw client: what it received, and whether (and when) the server closed it. */
interface Raw {
  s: net.Socket;
  data: () => string;
  closedAt: number | null;
}

/** Connects to the HTTP port and writes `first`; resolves once connected and written. */
function open(first: string): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1');
    let text = '';
    const r: Raw = { s, data: () => text, closedAt: null };
    s.on('data', (d) => (text += d.toString('latin1')));
    s.on('close', () => (r.closedAt = Date.now()));
    s.on('error', () => {});
    s.once('connect', () => s.write(first, () => resolve(r)));
    s.once('error', reject);
  });
}

/** A stream that is live from a real FFmpeg publisher (MP3, so `/listen` serves it). */
async function liveStream(title: string, seconds: number): Promise<string> {
  const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title, codec: 'mp3', quality: 'medium', reconnectWindow: 1 })).json as { id: string; rtmpUrl: string; streamKey: string };
  children.push(publish(`${s.rtmpUrl}/${s.streamKey}`, { seconds, codecArgs: ['-ac', '2', '-ar', '44100', '-c:a', 'libmp3lame', '-b:a', '128k'] }));
  await waitFor(async () => (await fetch(`${t.http}/listen/${s.id}.mp3`, { method: 'HEAD' })).status === 200, 20_000, 100, `${title} live`);
  return s.id;
}

/** Reads `bytes` of `/listen/<id>.mp3` over HTTP/1.1 and closes. */
async function listenBytes(id: string, bytes: number): Promise<number> {
  const ac = new AbortController();
  const r = await fetch(`${t.http}/listen/${id}.mp3`, { signal: ac.signal });
  expect(r.status).toBe(200);
  let got = 0;
  for await (const chunk of r.body!) {
    got += (chunk as Uint8Array).length;
    if (got >= bytes) break;
  }
  ac.abort();
  return got;
}

beforeAll(async () => {
  t = await startInProcess({
    SKYLARK_LISTEN_MAX_CONNECTIONS_PER_IP: String(PER_IP),
    SKYLARK_HTTP10_HEAD_TIMEOUT_MS: String(HEAD_MS),
    SKYLARK_HTTP10_IDLE_TIMEOUT_MS: String(IDLE_MS),
  });
  port = t.server.httpPort;
});

afterAll(async () => {
  for (const c of children) c.kill('SIGKILL');
  await Promise.all(children.map((c) => exited(c)));
  await t?.close();
});

describe('HTTP/1.0 connections are bounded (docs/behaviour.md §13)', () => {
  it(`holds ${PER_IP} half-sent heads from one address, refuses more, answers everything else, and closes them at the head timeout`, async () => {
    const first = await liveStream('Held heads', 60);
    const limits = t.server.limits;
    const timeoutsBefore = limits.count('http10_head_timeout');
    const started = Date.now();
    // Half-sent heads: a request line and nothing more, as in the attack.
    const held = await Promise.all(Array.from({ length: PER_IP }, () => open('GET /v2 HTTP/1.0\r\n')));
    try {
    // Over the per-address cap: closed at once, unanswered.
    const over = await open('GET /v2 HTTP/1.0\r\n');
    await waitFor(() => over.closedAt !== null, 5000, 20, 'the connection over the cap to be closed');
    expect(over.data()).toBe('');
    expect(limits.count('http10_connections_per_ip')).toBeGreaterThanOrEqual(1);
    // Everything else answers meanwhile: the API over HTTP/1.1, a new RTMP publish (FFmpeg), /listen.
    const streams = await api(t.http, t.secretKey, 'GET', '/v2/streams');
    expect(streams.status).toBe(200);
    const second = await liveStream('Published meanwhile', 30);
    expect(await listenBytes(first, 8000)).toBeGreaterThanOrEqual(8000);
    expect(await listenBytes(second, 4000)).toBeGreaterThanOrEqual(4000);
    const checkedAt = Date.now();
    // None was closed before its deadline…
    if (checkedAt - started < HEAD_MS - 500) expect(held.filter((h) => h.closedAt !== null)).toHaveLength(0);
    // …and each is closed after it, with a 408.
    await waitFor(() => held.every((h) => h.closedAt !== null), HEAD_MS + 10_000, 100, 'every half-sent head to be closed');
    for (const h of held) {
      expect(h.closedAt! - started).toBeGreaterThanOrEqual(HEAD_MS - 200);
      expect(h.data()).toMatch(/^HTTP\/1\.1 408 /);
    }
    expect(limits.count('http10_head_timeout') - timeoutsBefore).toBe(PER_IP);
    } finally {
      for (const h of held) h.s.destroy();
    }
    // Their slots are free again: an HTTP/1.0 request from the same address is answered.
    const again = await open('GET /v2/openapi.json HTTP/1.0\r\n\r\n');
    await waitFor(() => again.closedAt !== null, 10_000, 50, 'the answer');
    expect(again.data()).toMatch(/^HTTP\/1\.1 200 /);
  }, 90_000);

  it('closes a head sent a byte at a time at its deadline (bytes do not extend it)', async () => {
    const started = Date.now();
    const c = await open('GET /v2/openapi.json HTTP/1.0\r\n');
    const drip = setInterval(() => c.s.write('X'), 250);
    try {
      await waitFor(() => c.closedAt !== null, HEAD_MS + 5000, 50, 'the dripping head to be closed');
    } finally {
      clearInterval(drip);
    }
    expect(c.closedAt! - started).toBeGreaterThanOrEqual(HEAD_MS - 200);
  }, 20_000);

  it('closes an idle kept-alive connection after the idle timeout, not before its next request', async () => {
    const c = await open('GET /v2/openapi.json HTTP/1.0\r\nConnection: keep-alive\r\n\r\n');
    await waitFor(() => /content-length: (\d+)/i.test(c.data()), 10_000, 20, 'the first answer');
    // A second request after a pause shorter than the idle timeout: answered on the same connection.
    await new Promise((r) => setTimeout(r, IDLE_MS / 2));
    c.s.write('GET /no/such/path HTTP/1.0\r\nConnection: keep-alive\r\n\r\n');
    await waitFor(() => (c.data().match(/HTTP\/1\.1 \d{3} /g) ?? []).length === 2, 10_000, 20, 'the second answer');
    const answeredAt = Date.now();
    expect(c.closedAt).toBeNull();
    await waitFor(() => c.closedAt !== null, IDLE_MS + 2500, 50, 'the idle connection to be closed');
    expect(c.closedAt! - answeredAt).toBeGreaterThanOrEqual(IDLE_MS - 200);
  }, 30_000);

  it('does not cut a /listen answer that outlasts both timeouts, nor a slow upload', async () => {
    const id = await liveStream('Long listen', 40);
    const listener = await open(`GET /listen/${id}.mp3 HTTP/1.0\r\n\r\n`);
    // A POST whose body comes slowly, over longer than the head timeout.
    const body = JSON.stringify({ title: 'Slow upload over HTTP/1.0' });
    const upload = await open(`POST /v2/streams HTTP/1.0\r\nAuthorization: Bearer ${t.secretKey}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`);
    const pieces = body.match(/.{1,4}/g)!;
    const gap = Math.ceil((HEAD_MS + IDLE_MS) / pieces.length);
    for (const p of pieces) {
      await new Promise((r) => setTimeout(r, gap));
      upload.s.write(p);
    }
    await waitFor(() => upload.closedAt !== null, 10_000, 50, 'the upload answer');
    expect(upload.data()).toMatch(/^HTTP\/1\.1 201 /);
    // The listener got audio all along and is still open.
    expect(listener.closedAt).toBeNull();
    const before = listener.data().length;
    await waitFor(() => listener.data().length > before + 4000, 10_000, 100, 'more audio');
    expect(listener.closedAt).toBeNull();
    listener.s.destroy();
  }, 60_000);
});

describe('a trusted proxy (SKYLARK_TRUSTED_PROXIES) is held to the total only', () => {
  it('takes more connections from the proxy than the per-address cap, not from another address', async () => {
    const s = await startInProcess({ SKYLARK_LISTEN_MAX_CONNECTIONS_PER_IP: '2', SKYLARK_TRUSTED_PROXIES: '127.0.0.1/32' });
    const opened: net.Socket[] = [];
    try {
      const head = (from: string) =>
        new Promise<{ closed: () => boolean }>((resolve) => {
          const c = net.connect({ port: s.server.httpPort, host: '127.0.0.1', localAddress: from });
          let closed = false;
          c.on('close', () => (closed = true));
          c.on('error', () => {});
          c.once('connect', () => c.write('GET /v2 HTTP/1.0\r\n', () => resolve({ closed: () => closed })));
          opened.push(c);
        });
      const proxy: Array<{ closed: () => boolean }> = [];
      for (let i = 0; i < 5; i++) proxy.push(await head('127.0.0.1'));
      const other: Array<{ closed: () => boolean }> = [];
      for (let i = 0; i < 3; i++) other.push(await head('127.0.0.2'));
      await waitFor(() => other[2]!.closed(), 5000, 20, 'the third connection of 127.0.0.2 to be closed');
      expect(other.slice(0, 2).every((o) => !o.closed())).toBe(true);
      expect(proxy.every((p) => !p.closed())).toBe(true);
      expect(s.server.limits.count('http10_connections_per_ip')).toBe(1);
    } finally {
      for (const c of opened) c.destroy();
      await s.close();
    }
  }, 30_000);
});

const hasPrlimit = spawnSync('prlimit', ['--version']).status === 0;
describe.skipIf(!hasPrlimit)('a process at 400 open files (the limit of the report)', () => {
  it('380 half-sent HTTP/1.0 heads from one address leave descriptors free and the API answering', async () => {
    const data = tempDir('skylark-http10-fds-');
    // `skylark serve` under RLIMIT_NOFILE 400 (soft and hard: Node cannot raise it).
    const child = spawn('prlimit', ['--nofile=400:400', process.execPath, path.join(repoRoot, 'bin', 'skylark.js'), 'serve'], {
      env: { ...process.env, SKYLARK_HTTP_PORT: '0', SKYLARK_RTMP_PORT: '0', SKYLARK_ICECAST_PORT: '0', SKYLARK_DATA_DIR: data.dir, SKYLARK_HTTP_THREADS: testHttpThreads, SKYLARK_LOG_LEVEL: 'error' },
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    children.push(child);
    const socks: Raw[] = [];
    try {
      const line = await new Promise<string>((resolve, reject) => {
        createInterface({ input: child.stdout! }).once('line', resolve);
        child.once('exit', (code) => reject(new Error(`serve exited with ${code}`)));
      });
      const http = (JSON.parse(line) as { http: string }).http;
      const descriptors = () => readdirSync(`/proc/${child.pid}/fd`).length;
      const at = Number(new URL(http).port);
      for (let i = 0; i < 380; i++) {
        const r = await new Promise<Raw>((resolve) => {
          const s = net.connect(at, '127.0.0.1');
          const raw: Raw = { s, data: () => '', closedAt: null };
          s.on('close', () => (raw.closedAt = Date.now()));
          s.on('error', () => {});
          s.once('connect', () => s.write('GET /v2 HTTP/1.0\r\n', () => resolve(raw)));
        });
        socks.push(r);
      }
      // The per-address cap (100 by default) closes the rest; the held ones leave room.
      await waitFor(() => socks.filter((r) => r.closedAt !== null).length >= 280, 10_000, 50, 'the connections over the cap to be closed');
      expect(descriptors()).toBeLessThan(300);
      const answer = await fetch(`${http}/v2/openapi.json`, { signal: AbortSignal.timeout(5000) });
      expect(answer.status).toBe(200);
    } finally {
      for (const r of socks) r.s.destroy();
      child.kill('SIGTERM');
      await exited(child);
      data.cleanup();
    }
  }, 60_000);
});
