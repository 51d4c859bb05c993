/**
 * HTTP/1.0 everywhere (docs/http.md "HTTP/1.0"): a real server, raw HTTP/1.0 clients, curl
 * `--http1.0`, and a stock nginx with its default `proxy_pass` (which speaks HTTP/1.0 to its
 * upstream). Every answer is the HTTP/1.1 answer (status, headers, body), framed as HTTP/1.0
 * wants it: a known length with `Content-Length`, a progressive `/listen` stream unframed until
 * the connection closes, the connection closed after the response unless `Connection: keep-alive`
 * was asked. Also run with two HTTP threads (`npm run test:threads`).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import net from 'node:net';
import path from 'node:path';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { api, freePort, startInProcess, tempDir, waitFor, type TestServer } from '../../helpers/server.js';
import { exited, publish } from '../../helpers/publish.js';
import { nginxBinary } from '../../../bench/lib/nginx-edges.js';
import { httpFrontCounts } from '../../../src/native/http-front.js';

let t: TestServer;
let port: number;
const tmp = tempDir('skylark-http10-');
const children: ChildProcess[] = [];

interface RawAnswer {
  status: number;
  head: string;
  headers: Map<string, string>;
  body: Buffer;
  /** True when the server closed the connection (we did not). */
  serverClosed: boolean;
}

/**
 * Sends `request` (raw bytes) to 127.0.0.1:`to` and reads until the server closes, `maxBody`
 * body bytes arrived (then closes itself), or `ms` passed.
 */
function raw(to: number, request: string | Buffer, o: { maxBody?: number; ms?: number } = {}): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const s = net.connect(to, '127.0.0.1', () => s.write(request));
    let buf = Buffer.alloc(0);
    let done = false;
    const finish = (serverClosed: boolean) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      s.destroy();
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return reject(new Error(`no response head (${buf.length} bytes: ${JSON.stringify(buf.toString('latin1').slice(0, 200))})`));
      const head = buf.subarray(0, end).toString('latin1');
      const lines = head.split('\r\n');
      const headers = new Map<string, string>();
      for (const l of lines.slice(1)) {
        const i = l.indexOf(':');
        headers.set(l.slice(0, i).trim().toLowerCase(), l.slice(i + 1).trim());
      }
      resolve({ status: Number(lines[0]!.split(' ')[1]), head, headers, body: buf.subarray(end + 4), serverClosed });
    };
    const timer = setTimeout(() => finish(false), o.ms ?? 10_000);
    s.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      const end = buf.indexOf('\r\n\r\n');
      if (o.maxBody !== undefined && end >= 0 && buf.length - end - 4 >= o.maxBody) finish(false);
    });
    s.on('end', () => finish(true));
    s.on('close', () => finish(true));
    s.on('error', (e) => (done ? undefined : reject(e)));
  });
}

/** Like `raw`, but writes `pieces` one by one, each after the server had time to read the one before. */
async function rawPieces(to: number, pieces: string[], ms = 10_000): Promise<RawAnswer> {
  const s = net.connect(to, '127.0.0.1');
  await new Promise((r) => s.once('connect', r));
  let buf = Buffer.alloc(0);
  let closed = false;
  s.on('data', (d) => (buf = Buffer.concat([buf, d])));
  const done = new Promise<void>((r) => s.on('close', () => ((closed = true), r())));
  s.on('error', () => {});
  for (const p of pieces) {
    s.write(p);
    await new Promise((r) => setTimeout(r, 60)); // separate reads on the server (not a timing assertion)
  }
  await Promise.race([done, new Promise((r) => setTimeout(r, ms))]);
  s.destroy();
  const end = buf.indexOf('\r\n\r\n');
  if (end < 0) throw new Error(`no response head (${buf.length} bytes, closed ${closed})`);
  const head = buf.subarray(0, end).toString('latin1');
  const lines = head.split('\r\n');
  const headers = new Map(lines.slice(1).map((l) => [l.slice(0, l.indexOf(':')).trim().toLowerCase(), l.slice(l.indexOf(':') + 1).trim()] as const));
  return { status: Number(lines[0]!.split(' ')[1]), head, headers, body: buf.subarray(end + 4), serverClosed: closed };
}

/** The same request over HTTP/1.1 with fetch: status, headers, body. */
async function over11(p: string, init: RequestInit = {}) {
  const r = await fetch(`http://127.0.0.1:${port}${p}`, init);
  return { status: r.status, headers: r.headers, body: Buffer.from(await r.arrayBuffer()) };
}


beforeAll(async () => {
  t = await startInProcess();
  port = t.server.httpPort;
});

afterAll(async () => {
  for (const c of children) c.kill('SIGKILL');
  await Promise.all(children.map((c) => exited(c)));
  await t?.close();
  tmp.cleanup();
});

describe('HTTP/1.0 requests (docs/http.md)', () => {
  it('answers GET as HTTP/1.1 does (status, headers, body) and closes after the response', async () => {
    const a = await raw(port, 'GET /v2/openapi.json HTTP/1.0\r\nHost: x\r\n\r\n');
    const b = await over11('/v2/openapi.json');
    expect(a.status).toBe(200);
    expect(a.serverClosed).toBe(true);
    expect(a.headers.get('transfer-encoding')).toBeUndefined();
    expect(a.headers.get('content-type')).toBe(b.headers.get('content-type'));
    expect(a.headers.get('content-length')).toBe(String(b.body.length));
    expect(a.body.equals(b.body)).toBe(true);
    expect(a.headers.get('connection')?.toLowerCase()).toBe('close');
  });

  it('answers a request without Host, and an unknown path with the same 404 envelope', async () => {
    const a = await raw(port, 'GET /v2/openapi.json HTTP/1.0\r\n\r\n');
    expect(a.status).toBe(200);
    const n = await raw(port, 'GET /no/such/path HTTP/1.0\r\n\r\n');
    const n11 = await over11('/no/such/path');
    expect(n.status).toBe(n11.status);
    const noId = (b: Buffer) => b.toString().replace(/req_[A-Za-z0-9]+/g, 'req_');
    expect(noId(n.body)).toBe(noId(n11.body));
    expect(n.headers.get('content-type')).toBe(n11.headers.get('content-type'));
  });

  it('keeps the connection open for Connection: keep-alive (two requests, one connection)', async () => {
    const answers = await new Promise<string>((resolve) => {
      const s = net.connect(port, '127.0.0.1', () => s.write('GET /v2/openapi.json HTTP/1.0\r\nConnection: keep-alive\r\n\r\n'));
      let text = '';
      let second = false;
      s.on('data', (d) => {
        text += d.toString('latin1');
        const first = text.indexOf('\r\n\r\n');
        const len = /content-length: (\d+)/i.exec(text)?.[1];
        if (!second && first >= 0 && len && text.length >= first + 4 + Number(len)) {
          second = true;
          s.write('GET /no/such/path HTTP/1.0\r\nConnection: keep-alive\r\n\r\n');
        }
      });
      s.on('close', () => resolve(text));
      setTimeout(() => s.destroy(), 2000);
    });
    expect(answers.match(/HTTP\/1\.1 (200|404) /g)).toEqual(['HTTP/1.1 200 ', 'HTTP/1.1 404 ']);
    expect(answers).toMatch(/connection: keep-alive/i);
  });

  it('takes a body (POST with Content-Length) and answers HEAD with headers only', async () => {
    const body = JSON.stringify({ title: 'Over HTTP/1.0' });
    const a = await raw(port, `POST /v2/streams HTTP/1.0\r\nAuthorization: Bearer ${t.secretKey}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
    expect(a.status).toBe(201);
    const stream = JSON.parse(a.body.toString()) as { id: string; title: string };
    expect(stream.title).toBe('Over HTTP/1.0');
    const h = await raw(port, 'HEAD /v2/openapi.json HTTP/1.0\r\n\r\n');
    expect(h.status).toBe((await over11('/v2/openapi.json', { method: 'HEAD' })).status);
    expect(h.headers.get('content-length')).toBeDefined();
    expect(h.body.length).toBe(0);
    expect(h.serverClosed).toBe(true);
  });

  it('answers a request line split across reads like a whole one (docs/http.md "Framing")', async () => {
    const whole = await raw(port, 'GET /no/such/path HTTP/1.0\r\nHost: x\r\n\r\n');
    expect(whole.status).toBe(404);
    const noId = (b: Buffer) => b.toString().replace(/req_[A-Za-z0-9]+/g, 'req_');
    for (const pieces of [['GET /no/such/path HTT', 'P/1.0\r\nHost: x\r\n\r\n'], ['G', 'ET /no/such/path HTTP/1.0\r\nHost: x\r\n\r\n'], ['GET /no/su', 'ch/pa', 'th HTTP/1.0\r', '\nHost: x\r\n\r\n']]) {
      const a = await rawPieces(port, pieces);
      expect(a.status, JSON.stringify(pieces)).toBe(404);
      expect(noId(a.body)).toBe(noId(whole.body));
      expect(a.serverClosed).toBe(true);
    }
    // HTTP/1.1 split the same way: answered, and the connection stays open for the next request.
    const b = await rawPieces(port, ['G', 'ET /no/such/path HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n']);
    expect(b.status).toBe(404);
  });

  it('hands on a first line that never ends within 8 KiB, and a silent connection is closed by the idle timeout', async () => {
    const long = await rawPieces(port, ['GET /' + 'a'.repeat(4000), 'b'.repeat(5000)], 15_000).catch((e: Error) => e);
    // The HTTP server refuses a request line that long (or closes at once): either way it ends the connection.
    if (!(long instanceof Error)) expect(long.status).toBeGreaterThanOrEqual(400);
    // Nothing, half a request line, a whole line with the head never ended: each is closed by the
    // library's idle timeout or, where the library keeps none, by the front's idle sweep
    // (docs/http.md "Idle connections").
    const closedBySilence = (bytes: string) =>
      new Promise<boolean>((resolve) => {
        const s = net.connect(port, '127.0.0.1', () => bytes && s.write(bytes));
        s.on('close', () => resolve(true));
        s.on('error', () => {});
        setTimeout(() => {
          s.destroy();
          resolve(false);
        }, 20_000);
      });
    expect(await Promise.all(['', 'GET /v2/openapi', 'GET /v2/openapi HTTP/1.1\r\nHost: x\r\n'].map(closedBySilence))).toEqual([true, true, true]);
  }, 30_000);

  it('answers curl --http1.0', async () => {
    const { stdout } = await promisify(execFile)('curl', ['-sS', '--http1.0', '-D', '-', `http://127.0.0.1:${port}/v2/openapi.json`, '-o', '/dev/null']);
    expect(stdout).toMatch(/^HTTP\/1\.1 200/);
  });
});

describe('progressive listening and HLS over HTTP/1.0', () => {
  let id = '';
  beforeAll(async () => {
    const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Ten', codec: 'mp3', quality: 'medium', reconnectWindow: 1 })).json;
    id = s.id;
    const pub = publish(`${s.rtmpUrl}/${s.streamKey}`, { seconds: 60, codecArgs: ['-ac', '2', '-ar', '44100', '-c:a', 'libmp3lame', '-b:a', '128k'] });
    children.push(pub);
    await waitFor(async () => (await fetch(`${t.http}/listen/${id}.mp3`, { method: 'HEAD' })).status === 200, 30_000, 200, 'listening');
  }, 40_000);

  it('/listen over HTTP/1.0 is the audio itself, unframed, from a frame boundary; its send buffer is capped', async () => {
    const capped = httpFrontCounts().capped;
    const a = await raw(port, `GET /listen/${id}.mp3 HTTP/1.0\r\nIcy-MetaData: 0\r\n\r\n`, { maxBody: 16_000 });
    expect(a.status).toBe(200);
    expect(a.headers.get('transfer-encoding')).toBeUndefined();
    expect(a.headers.get('content-length')).toBeUndefined();
    expect(a.headers.get('content-type')).toBe('audio/mpeg');
    // An MP3 frame header (11 sync bits), not a chunk-size line.
    expect(a.body[0]).toBe(0xff);
    expect(a.body[1]! & 0xe0).toBe(0xe0);
    expect(a.body.length).toBeGreaterThanOrEqual(16_000);
    expect(httpFrontCounts().capped).toBeGreaterThan(capped);
  });

  it('caps the kernel send buffer of a /listen connection (HTTP/1.1 too), not of other connections', async () => {
    // The server side of each connection, as `ss` reports it: skmem tb = the send buffer (bytes).
    const sendBuffer = async (clientPort: number) => {
      const { stdout } = await promisify(execFile)('ss', ['-tmnH', 'state', 'established', `( sport = :${port} and dport = :${clientPort} )`]);
      const tb = /tb(\d+)/.exec(stdout)?.[1];
      if (!tb) throw new Error(`ss found no connection to :${clientPort}: ${stdout}`);
      return Number(tb);
    };
    const open = (request: string) =>
      new Promise<net.Socket>((resolve) => {
        const s = net.connect(port, '127.0.0.1', () => s.write(request));
        s.once('data', () => {
          s.pause(); // never reads again: the server's send buffer fills
          resolve(s);
        });
      });
    const listener = await open(`GET /listen/${id}.mp3 HTTP/1.1\r\nHost: x\r\n\r\n`);
    const other = await open('GET /v2/openapi.json HTTP/1.1\r\nHost: x\r\n\r\n');
    try {
      // SO_SNDBUF 256 KiB: Linux reports twice that (its bookkeeping share).
      expect(await sendBuffer(listener.localPort!)).toBe(2 * 256 * 1024);
      // The 230 KB API answer left in the kernel grows an autotuned buffer past the cap.
      await waitFor(async () => (await sendBuffer(other.localPort!)) > 2 * 256 * 1024, 5_000, 100, 'autotuned send buffer');
    } finally {
      listener.destroy();
      other.destroy();
    }
  });

  it('caps the send buffer of a keep-alive connection whose later request is /listen (HTTP/1.1)', async () => {
    const capped = httpFrontCounts().capped;
    const s = net.connect(port, '127.0.0.1');
    let text = '';
    s.on('data', (d) => (text += d.toString('latin1')));
    s.on('error', () => {});
    try {
      s.write('GET /no/such/path HTTP/1.1\r\nHost: x\r\n\r\n');
      await waitFor(() => /^HTTP\/1\.1 404/.test(text) && /\r\n\r\n[\s\S]*\}/.test(text), 5000, 20, 'the 404');
      expect(httpFrontCounts().capped).toBe(capped);
      s.write(`GET /listen/${id}.mp3 HTTP/1.1\r\nHost: x\r\n\r\n`);
      await waitFor(() => /HTTP\/1\.1 200/.test(text), 5000, 20, 'the stream');
      expect(httpFrontCounts().capped).toBe(capped + 1);
    } finally {
      s.destroy();
    }
  });

  it('serves the multivariant playlist and a segment over HTTP/1.0', async () => {
    const m = await raw(port, `GET /hls/${id}/index.m3u8 HTTP/1.0\r\n\r\n`);
    expect(m.status).toBe(200);
    expect(m.body.toString()).toMatch(/^#EXTM3U/);
    const variant = m.body.toString().split('\n').find((l) => l && !l.startsWith('#'))!;
    const media = await raw(port, `GET /hls/${id}/${variant} HTTP/1.0\r\n\r\n`);
    expect(media.status).toBe(200);
    const seg = media.body.toString().split('\n').find((l) => l && !l.startsWith('#'))!;
    const dir = path.posix.dirname(`/hls/${id}/${variant}`);
    const s = await raw(port, `GET ${seg.startsWith('/') ? seg : `${dir}/${seg}`} HTTP/1.0\r\n\r\n`);
    expect(s.status).toBe(200);
    expect(s.body.length).toBe(Number(s.headers.get('content-length')));
  });

  const nginx = nginxBinary();
  describe.skipIf(!nginx)('behind a stock nginx with its default proxy_pass (HTTP/1.0 upstream)', () => {
    let edge = 0;
    beforeAll(async () => {
      edge = await freePort();
      const dir = path.join(tmp.dir, 'nginx');
      for (const d of ['body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) mkdirSync(path.join(dir, d), { recursive: true });
      const conf = path.join(dir, 'nginx.conf');
      writeFileSync(conf, `daemon off;
worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  server {
    listen 127.0.0.1:${edge};
    location / { proxy_pass http://127.0.0.1:${port}; }
  }
}
`);
      const child = spawn(nginx!, ['-c', conf, '-p', dir], { stdio: 'ignore' });
      children.push(child);
      await waitFor(async () => (await fetch(`http://127.0.0.1:${edge}/v2/openapi.json`).catch(() => null))?.status === 200, 10_000, 100, 'nginx');
    }, 20_000);

    it('answers the API, HLS and /listen through nginx', async () => {
      const doc = await fetch(`http://127.0.0.1:${edge}/v2/openapi.json`);
      expect(doc.status).toBe(200);
      expect(Buffer.from(await doc.arrayBuffer()).equals((await over11('/v2/openapi.json')).body)).toBe(true);
      const created = await fetch(`http://127.0.0.1:${edge}/v2/streams`, {
        method: 'POST',
        headers: { authorization: `Bearer ${t.secretKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ title: 'Behind nginx' }),
      });
      expect(created.status).toBe(201);
      const playlist = await fetch(`http://127.0.0.1:${edge}/hls/${id}/index.m3u8`);
      expect(playlist.status).toBe(200);
      expect(await playlist.text()).toMatch(/^#EXTM3U/);
      const listen = await raw(edge, `GET /listen/${id}.mp3 HTTP/1.1\r\nHost: edge\r\n\r\n`, { maxBody: 8_000 });
      expect(listen.status).toBe(200);
      expect(listen.headers.get('content-type')).toBe('audio/mpeg');
    });
  });
});
