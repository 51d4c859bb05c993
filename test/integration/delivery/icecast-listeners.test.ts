/**
 * The Icecast port as a drop-in Icecast 2.4 for listeners (docs/icecast.md): a real server, a real
 * FFmpeg `icecast://` source, real listeners on the Icecast port.
 * - A raw HTTP/1.0 client with `Icy-MetaData: 1` gets `HTTP/1.0 200 OK`, `icy-metaint`, the station
 *   identity (`icy-name` = the stream's title, `icy-description`/`icy-genre`/`icy-url` from its
 *   metadata, not the source's `ice-name`/`ice-genre`), `icy-br`, `Cache-Control: no-cache,
 *   no-store`, MP3 from a frame boundary, and StreamTitle blocks carrying the `updinfo` title
 *   (sent in ISO-8859-1, quote escaped); it is a listener with protocol "icecast" while connected.
 * - HTTP/1.1 gets the same unframed body (no chunked coding); HEAD the headers only.
 * - `.aac` of an MP3 stream, an unknown stream, an idle stream → 404; a token stream needs `?token=`.
 * - FFmpeg, mpv and GStreamer (souphttpsrc + icydemux) play `/live/<id>` and read the title.
 * - `/status-json.xsl`: `icestats.source` is an array listing the public stream, not the token one.
 * - The listening caps are the node's: Icecast-port and `/listen` listeners count together (429).
 * - An Opus stream is served at `.ogg` and `.opus` as Ogg Opus.
 * - A listener that stops reading is cut (`listen_slow_client`): its socket's send buffer is capped
 *   (SKYLARK_LISTEN_SEND_BUFFER_BYTES), so the kernel cannot hide the stall for minutes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import { api, startInProcess, waitFor, type TestServer } from '../../helpers/server.js';
import { exited } from '../../helpers/publish.js';
import { ffmpegPath } from '../../helpers/ffmpeg.js';

let t: TestServer;
let port: number;
const children: ChildProcess[] = [];

const MP3 = ['-ac', '2', '-ar', '44100', '-c:a', 'libmp3lame', '-b:a', '128k', '-content_type', 'audio/mpeg', '-f', 'mp3'];

/** A stream with an FFmpeg icecast:// MP3 source for `seconds`; resolves once the Icecast port serves it. */
async function liveMp3(extra: Record<string, unknown>, seconds = 120, sourceArgs: string[] = []) {
  const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { codec: 'mp3', quality: 'medium', reconnectWindow: 0, ...extra })).json as { id: string; streamKey: string; title: string };
  const src = spawn(ffmpegPath(), ['-hide_banner', '-loglevel', 'error', '-re', '-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=44100', '-t', String(seconds), ...MP3, ...sourceArgs, `icecast://source:${s.streamKey}@127.0.0.1:${port}/live/${s.id}`], { stdio: ['ignore', 'ignore', 'pipe'] });
  children.push(src);
  const q = extra.playback === 'token' ? '?token=x' : '';
  await waitFor(async () => {
    const h = await raw(`HEAD /live/${s.id}${q} HTTP/1.0\r\n\r\n`);
    return /^HTTP\/1\.0 (200|403)/.test(h.head) ? true : null;
  }, 30_000, 250, 'the mount to serve');
  return s;
}

/** One raw request on the Icecast port; resolves with the response head and body once closed (or `limit` body bytes). */
function raw(request: string, limit = Infinity): Promise<{ head: string; body: Buffer; headers: Map<string, string> }> {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1', () => sock.write(request));
    const chunks: Buffer[] = [];
    let size = 0;
    const done = () => {
      const all = Buffer.concat(chunks);
      const end = all.indexOf('\r\n\r\n');
      const head = end < 0 ? all.toString('latin1') : all.subarray(0, end).toString('latin1');
      const headers = new Map<string, string>();
      for (const line of head.split('\r\n').slice(1)) {
        const c = line.indexOf(':');
        if (c > 0) headers.set(line.slice(0, c).toLowerCase(), line.slice(c + 1).trim());
      }
      resolve({ head, body: end < 0 ? Buffer.alloc(0) : all.subarray(end + 4), headers });
    };
    sock.on('data', (d: Buffer) => {
      chunks.push(d);
      size += d.length;
      if (size >= limit) {
        sock.destroy();
        done();
      }
    });
    sock.on('close', done);
    sock.on('error', reject);
    setTimeout(() => sock.destroy(), 20_000).unref();
  });
}

/** The metadata blocks' texts of an ICY body (`metaint` audio bytes, then a block), and the audio. */
function icy(body: Buffer, metaint: number): { titles: string[]; audio: Buffer } {
  const titles: string[] = [];
  const audio: Buffer[] = [];
  let o = 0;
  while (o + metaint < body.length) {
    audio.push(body.subarray(o, o + metaint));
    o += metaint;
    const n = body[o]! * 16;
    if (o + 1 + n > body.length) break;
    titles.push(body.subarray(o + 1, o + 1 + n).toString('utf8').replace(/\0+$/, ''));
    o += 1 + n;
  }
  return { titles, audio: Buffer.concat(audio) };
}

function run(cmd: string, args: string[]): Promise<{ code: number | string | null; out: string }> {
  const p = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  p.stdout!.on('data', (d) => (out += d));
  p.stderr!.on('data', (d) => (out += d));
  const timer = setTimeout(() => p.kill('SIGKILL'), 40_000);
  return exited(p).then((code) => {
    clearTimeout(timer);
    return { code, out };
  });
}

let station: { id: string; streamKey: string; title: string };
const auth = (key: string) => `Basic ${Buffer.from(`source:${key}`).toString('base64')}`;

beforeAll(async () => {
  // A small listening cap per address, so the test can reach it (the other tests hold one listener at a time).
  // A small send buffer, so that a stalled reader is seen behind within seconds.
  t = await startInProcess({ SKYLARK_ABR_LADDER: '0', SKYLARK_LISTEN_MAX_CONNECTIONS_PER_IP: '3', SKYLARK_LISTEN_SEND_BUFFER_BYTES: '65536' });
  port = t.server.icecastPort;
  station = await liveMp3(
    { title: 'Skylark FM', metadata: { description: 'Songs all day', genre: 'Jazz', url: 'https://fm.example/' } },
    120,
    ['-ice_name', 'Source Name', '-ice_genre', 'Source Genre', '-ice_description', 'Source Description'],
  );
  // The song, sent in ISO-8859-1 (%E9 = é) with a quote and a semicolon in it.
  const up = await raw(`GET /admin/metadata?mount=/live/${station.id}&mode=updinfo&charset=ISO-8859-1&song=Caf%E9+Trio+-+Don%27t+Stop%3B+Go HTTP/1.0\r\nAuthorization: ${auth(station.streamKey)}\r\n\r\n`);
  expect(up.head).toMatch(/^HTTP\/1\.0 200/);
}, 60_000);

afterAll(async () => {
  for (const c of children) c.kill('SIGKILL');
  await t?.close();
});

describe('Icecast port listeners', () => {
  it('HTTP/1.0 with Icy-MetaData: 1 — Icecast head, station identity, MP3 and escaped StreamTitle blocks; counted as an icecast listener', async () => {
    const np = await waitFor(async () => (await api(t.http, t.secretKey, 'GET', `/v2/streams/${station.id}`)).json.nowPlaying, 5000, 100, 'now playing');
    expect(np).toMatchObject({ artist: 'Café Trio', title: "Don't Stop; Go" });

    const listening = raw(`GET /live/${station.id} HTTP/1.0\r\nIcy-MetaData: 1\r\nUser-Agent: WinampMPEG/5.66\r\n\r\n`, 120_000);
    const listed = await waitFor(async () => {
      const r = await api(t.http, t.secretKey, 'GET', `/v2/streams/${station.id}/listeners`);
      return r.json.data.length >= 1 ? r.json.data[0] : null;
    }, 10_000, 100, 'the listener');
    expect(listed).toMatchObject({ protocol: 'icecast', userAgent: 'WinampMPEG/5.66' });
    const r = await listening;
    expect(r.head.split('\r\n')[0]).toBe('HTTP/1.0 200 OK');
    expect(r.headers.get('content-type')).toBe('audio/mpeg');
    expect(r.headers.get('icy-name')).toBe('Skylark FM');
    expect(r.headers.get('icy-description')).toBe('Songs all day');
    expect(r.headers.get('icy-genre')).toBe('Jazz');
    expect(r.headers.get('icy-url')).toBe('https://fm.example/');
    expect(r.headers.get('icy-br')).toBe('128');
    expect(r.headers.get('cache-control')).toBe('no-cache, no-store');
    expect(r.headers.has('transfer-encoding')).toBe(false);
    const metaint = Number(r.headers.get('icy-metaint'));
    expect(metaint).toBe(16000);
    // MP3 from a frame boundary (a frame sync), then blocks every metaint bytes.
    expect(r.body[0]).toBe(0xff);
    expect(r.body[1]! & 0xe0).toBe(0xe0);
    const { titles } = icy(r.body, metaint);
    expect(titles[0]).toBe("StreamTitle='Café Trio - Don\\'t Stop; Go';");
    expect(titles.slice(1).every((x) => x === '')).toBe(true);
  }, 30_000);

  it('HTTP/1.1 (and the .mp3 name) gets the same unframed HTTP/1.0 body; HEAD the headers only', async () => {
    const r = await raw(`GET /live/${station.id}.mp3 HTTP/1.1\r\nHost: x\r\n\r\n`, 20_000);
    expect(r.head.split('\r\n')[0]).toBe('HTTP/1.0 200 OK');
    expect(r.headers.has('transfer-encoding')).toBe(false);
    expect(r.headers.has('icy-metaint')).toBe(false);
    expect(r.body[0]).toBe(0xff);
    const h = await raw(`HEAD /live/${station.id} HTTP/1.1\r\nHost: x\r\n\r\n`);
    expect(h.head).toMatch(/^HTTP\/1\.0 200 OK/);
    expect(h.headers.get('icy-name')).toBe('Skylark FM');
    expect(h.body.length).toBe(0);
  });

  it('404: another codec, an unknown stream, an idle stream, another path', async () => {
    expect((await raw(`GET /live/${station.id}.aac HTTP/1.0\r\n\r\n`)).head).toMatch(/^HTTP\/1\.0 404/);
    expect((await raw('GET /live/stm_nothing HTTP/1.0\r\n\r\n')).head).toMatch(/^HTTP\/1\.0 404/);
    const idle = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Idle', codec: 'mp3', quality: 'medium' })).json as { id: string };
    expect((await raw(`GET /live/${idle.id} HTTP/1.0\r\n\r\n`)).head).toMatch(/^HTTP\/1\.0 404/);
    expect((await raw('GET /elsewhere HTTP/1.0\r\n\r\n')).head).toMatch(/^HTTP\/1\.0 404/);
  });

  it('FFmpeg, mpv and GStreamer play /live/<id> and read the ICY title', async () => {
    const url = `http://127.0.0.1:${port}/live/${station.id}`;
    const ff = await run(ffmpegPath(), ['-nostdin', '-hide_banner', '-v', 'error', '-i', url, '-t', '3', '-f', 'null', '-']);
    expect(ff).toEqual({ code: 0, out: '' });
    const mpv = await run('mpv', ['--no-config', '--no-video', '--ao=null', '--length=3', url]);
    expect(mpv.code).toBe(0);
    expect(mpv.out).toContain("icy-title: Café Trio - Don\\'t Stop; Go");
    const gst = await run('gst-launch-1.0', ['-t', 'souphttpsrc', `location=${url}`, 'iradio-mode=true', 'num-buffers=20', '!', 'icydemux', '!', 'fakesink']);
    expect(gst.code).toBe(0);
    expect(gst.out).toContain('Café Trio - Don');
    expect(gst.out).toContain('Skylark FM');
    expect(gst.out).not.toContain('Source Name');
    expect(gst.out).not.toContain('Source Genre');
  }, 90_000);

  it('a token stream needs ?token=, and /status-json.xsl lists the public stream only (an array)', async () => {
    const tok = await liveMp3({ title: 'Members only', playback: 'token' }, 60);
    expect((await raw(`GET /live/${tok.id} HTTP/1.0\r\n\r\n`)).head).toMatch(/^HTTP\/1\.0 401/);
    expect((await raw(`GET /live/${tok.id}?token=nope HTTP/1.0\r\n\r\n`)).head).toMatch(/^HTTP\/1\.0 403/);
    const token = (await api(t.http, t.secretKey, 'POST', `/v2/streams/${tok.id}/listener_tokens`)).json.token as string;
    const ok = await raw(`GET /live/${tok.id}?token=${token} HTTP/1.0\r\n\r\n`, 4000);
    expect(ok.head).toMatch(/^HTTP\/1\.0 200/);
    expect(ok.body[0]).toBe(0xff);

    const st = await raw('GET /status-json.xsl HTTP/1.0\r\n\r\n');
    expect(st.head).toMatch(/^HTTP\/1\.0 200/);
    expect(st.headers.get('content-type')).toMatch(/^application\/json/);
    const json = JSON.parse(st.body.toString('utf8')) as { icestats: { admin: string; host: string; server_id: string; source: Array<Record<string, unknown>> } };
    expect(json.icestats).toMatchObject({ host: '127.0.0.1' });
    expect(typeof json.icestats.admin).toBe('string');
    expect(json.icestats.server_id).toMatch(/Icecast/);
    expect(Array.isArray(json.icestats.source)).toBe(true);
    expect(json.icestats.source.map((s) => s.listenurl)).toEqual([`http://127.0.0.1:${port}/live/${station.id}`]);
    const s = json.icestats.source[0]!;
    expect(s).toMatchObject({
      server_name: 'Skylark FM',
      server_description: 'Songs all day',
      genre: 'Jazz',
      title: "Don't Stop; Go",
      artist: 'Café Trio',
      bitrate: 128,
      audio_info: 'bitrate=128',
      server_type: 'audio/mpeg',
    });
    expect(s.listeners).toBeTypeOf('number');
    expect(s.listener_peak).toBeGreaterThanOrEqual(1);
    expect(s.stream_start_iso8601).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+0000$/);
  }, 60_000);

  it('the listening cap per address counts Icecast-port and /listen listeners together (429 with Retry-After)', async () => {
    const held: net.Socket[] = [];
    const open = (path: string, p = port) =>
      new Promise<net.Socket>((resolve, reject) => {
        const sock = net.connect(p, '127.0.0.1', () => sock.write(`GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`));
        sock.once('data', () => resolve(sock));
        sock.on('error', reject);
        held.push(sock);
      });
    try {
      await open(`/live/${station.id}`);
      await open(`/live/${station.id}.mp3`);
      await open(`/listen/${station.id}.mp3`, Number(new URL(t.http).port));
      const over = await raw(`GET /live/${station.id} HTTP/1.0\r\n\r\n`);
      expect(over.head).toMatch(/^HTTP\/1\.0 429/);
      expect(over.headers.get('retry-after')).toBe('5');
      expect((await fetch(`${t.http}/listen/${station.id}.mp3`)).status).toBe(429);
    } finally {
      for (const s of held) s.destroy();
    }
    // Closed listeners give their slots back.
    await waitFor(async () => (await raw(`GET /live/${station.id} HTTP/1.0\r\n\r\n`, 2000)).head.startsWith('HTTP/1.0 200') || null, 5000, 100, 'a slot');
  });

  it('a listener that stops reading is cut as slow (the send buffer is capped)', async () => {
    const before = t.server.limits.count('listen_slow_client');
    // A raw socket that reads the response head, then nothing, with a tiny receive buffer.
    const py = spawn('python3', ['-c', `
import socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.connect(('127.0.0.1', ${port}))
s.sendall(b'GET /live/${station.id} HTTP/1.0\\r\\n\\r\\n')
print(s.recv(200)[:15].decode(), flush=True)
time.sleep(90)
`], { stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(py);
    try {
      const status = await new Promise<string>((r) => py.stdout!.once('data', (d) => r(String(d))));
      expect(status).toMatch(/^HTTP\/1.0 200/);
      await waitFor(() => t.server.limits.count('listen_slow_client') > before, 45_000, 250, 'the stalled listener to be cut');
    } finally {
      py.kill('SIGKILL');
    }
  }, 60_000);

  it('an Opus stream is served at .ogg and .opus as Ogg Opus', async () => {
    const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Opus FM', codec: 'opus', quality: 'medium', reconnectWindow: 0 })).json as { id: string; streamKey: string };
    const src = spawn(ffmpegPath(), ['-hide_banner', '-loglevel', 'error', '-re', '-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=48000', '-t', '60', '-ac', '2', '-c:a', 'libopus', '-b:a', '96k', '-content_type', 'audio/ogg', '-f', 'ogg', `icecast://source:${s.streamKey}@127.0.0.1:${port}/live/${s.id}`], { stdio: ['ignore', 'ignore', 'pipe'] });
    children.push(src);
    await waitFor(async () => /^HTTP\/1\.0 200/.test((await raw(`HEAD /live/${s.id}.ogg HTTP/1.0\r\n\r\n`)).head) || null, 30_000, 250, 'the Opus mount');
    for (const ext of ['ogg', 'opus', null]) {
      const r = await raw(`GET /live/${s.id}${ext ? `.${ext}` : ''} HTTP/1.0\r\n\r\n`, 4000);
      expect(r.head).toMatch(/^HTTP\/1\.0 200/);
      expect(r.headers.get('content-type')).toBe('audio/ogg');
      expect(r.body.subarray(0, 4).toString('latin1')).toBe('OggS');
      expect(r.body.indexOf('OpusHead')).toBeGreaterThan(0);
    }
    expect((await raw(`GET /live/${s.id}.mp3 HTTP/1.0\r\n\r\n`)).head).toMatch(/^HTTP\/1\.0 404/);
  }, 60_000);
});
