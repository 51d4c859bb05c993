/**
 * Progressive catch-up (docs/behaviour.md "Catch-up radio", docs/icecast.md "Listeners"):
 * `skylark serve` runs as a child process with two HTTP threads (a worker leaves `?start=` to the
 * main thread); a real FFmpeg publishes MP3 — a 440 Hz tone titled "Tone 440" in broadcast 1, an
 * 880 Hz tone titled "Tone 880" in broadcast 2 — to a stream with `catchUp: {hours: 1}`. Then
 * FFmpeg decodes `/listen/<id>.mp3?start=<t>` (Unix seconds and ISO 8601; `.aac` of an AAC token
 * stream beside it) and the Icecast port's
 * mounts with `?start=`, and the decoded frequency proves which broadcast each one plays; mpv shows
 * the ICY title that aired then; a start a few seconds back while broadcast 2 is live plays on past
 * the archive's newest segment at real-time pace, counted as a `catch_up` listener and by the
 * per-address cap (429); out-of-window,
 * future, catch-up off and wrong codec 404, malformed 400, a token stream needs its token.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { api, runCli, startCli, tempDir, waitFor, type CliServer } from '../../helpers/server.js';
import { exited, publish } from '../../helpers/publish.js';
import { ffmpegPath } from '../../helpers/ffmpeg.js';
import { runCommand } from '../../helpers/icecast-clients.js';

const MP3 = ['-ac', '2', '-ar', '44100', '-c:a', 'libmp3lame', '-b:a', '128k'];

/** Frequency (Hz) of the tone in mono 8 kHz s16le `pcm` between samples `from` and `to`, by zero crossings. */
function hzOf(pcm: Buffer, from: number, to: number): number {
  let crossings = 0;
  let prev = 0;
  for (let i = from; i < to; i++) {
    const v = pcm.readInt16LE(i * 2);
    const sign = v > 64 ? 1 : v < -64 ? -1 : 0;
    if (sign !== 0 && prev !== 0 && sign !== prev) crossings++;
    if (sign !== 0) prev = sign;
  }
  return crossings / 2 / ((to - from) / 8000);
}

/** Decodes `seconds` of `url` with FFmpeg (mono 8 kHz): the tone over the first and the last second, the seconds decoded, the wall time taken (ms). */
function tone(url: string, seconds: number): Promise<{ hz: number; lastHz: number; decoded: number; tookMs: number }> {
  return new Promise((resolve, reject) => {
    const began = Date.now();
    const args = ['-hide_banner', '-loglevel', 'error', '-i', url, '-t', String(seconds), '-vn', '-ac', '1', '-ar', '8000', '-f', 's16le', '-'];
    const p = spawn(ffmpegPath(), args, { stdio: ['ignore', 'pipe', 'pipe'] });
    const chunks: Buffer[] = [];
    let err = '';
    p.stdout.on('data', (d: Buffer) => chunks.push(d));
    p.stderr.on('data', (d) => (err += d));
    const timer = setTimeout(() => p.kill('SIGKILL'), 60_000);
    p.on('close', (code) => {
      clearTimeout(timer);
      const pcm = Buffer.concat(chunks);
      const n = Math.floor(pcm.length / 2);
      if (n < 12_000) return reject(new Error(`ffmpeg decoded ${n} samples of ${url} (exit ${code}): ${err}`));
      resolve({ hz: hzOf(pcm, 1600, Math.min(n, 9600)), lastHz: hzOf(pcm, n - 8000, n), decoded: n / 8000, tookMs: Date.now() - began });
    });
  });
}

const status = async (url: string, headers: Record<string, string> = {}) => {
  const c = new AbortController();
  const r = await fetch(url, { headers, signal: c.signal });
  const out = { status: r.status, type: r.headers.get('content-type'), body: r.status === 200 ? '' : await r.text() };
  c.abort();
  return out;
};
const unix = (ms: number) => Math.floor(ms / 1000);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('progressive catch-up', () => {
  const tmp = tempDir();
  let server: CliServer | undefined;
  /** What the first test made: the account key, the stream's listen URL, an instant of broadcast 1 (ms). */
  let made: { key: string; id: string; t1: number } | undefined;
  afterAll(async () => {
    await server?.stop();
    tmp.cleanup();
  });

  it('plays what aired at ?start=, with its ICY title, on /listen and on the Icecast port, and runs on into live', async () => {
    const key = JSON.parse(await runCli(['accounts', 'create', '--name', 'Catch-up', '--plan', 'paid', '--json', '--data-dir', tmp.dir])).secretKey as string;
    server = await startCli(tmp.dir, { SKYLARK_HTTP_THREADS: '2', SKYLARK_LISTEN_MAX_CONNECTIONS_PER_IP: '2' });
    const h = server.http;
    const mp3 = { codec: 'mp3', quality: 'medium', latencyMode: 'standard', reconnectWindow: 0 };
    const s = (await api(h, key, 'POST', '/v2/streams', { title: 'Tones', ...mp3, catchUp: { hours: 1 }, icecastMount: '/tones.mp3' })).json;
    const off = (await api(h, key, 'POST', '/v2/streams', { title: 'Off', ...mp3 })).json;
    // The token stream is AAC (fMP4 segments, LL-HLS parts): the other container read back.
    const tk = (await api(h, key, 'POST', '/v2/streams', { title: 'Gated', codec: 'aac', reconnectWindow: 0, playback: 'token', catchUp: { hours: 1 } })).json;
    const listen = `${h}/listen/${s.id}.mp3`;
    const isLive = async (id: string) => (await api(h, key, 'GET', `/v2/streams/${id}`)).json.status === 'live' || null;
    const isIdle = async (id: string) => (await api(h, key, 'GET', `/v2/streams/${id}`)).json.status === 'idle' || null;

    // Broadcast 1: 440 Hz, titled "Tone 440" once live (and the token stream beside it).
    const pub1 = publish(`${server.rtmp}/live/${s.id}/${s.streamKey}`, { seconds: 12, frequency: 440, codecArgs: MP3 });
    const gated = publish(`${server.rtmp}/live/${tk.id}/${tk.streamKey}`, { seconds: 8, frequency: 440 });
    await waitFor(() => isLive(s.id), 20_000, 200, 'broadcast 1 live');
    expect((await api(h, key, 'POST', `/v2/streams/${s.id}/now_playing`, { title: 'Tone 440' })).status).toBe(200);
    const t1 = Date.now() + 2000;
    await exited(pub1);
    await exited(gated);
    await waitFor(() => isIdle(s.id), 20_000, 200, 'broadcast 1 over');

    // Broadcast 2: 880 Hz, titled "Tone 880"; while it is live, a start 6 s back runs on past the newest kept segment.
    const pub2 = publish(`${server.rtmp}/live/${s.id}/${s.streamKey}`, { seconds: 22, frequency: 880, codecArgs: MP3 });
    await waitFor(() => isLive(s.id), 20_000, 200, 'broadcast 2 live');
    expect((await api(h, key, 'POST', `/v2/streams/${s.id}/now_playing`, { title: 'Tone 880' })).status).toBe(200);
    const t2 = Date.now() + 1000;
    await sleep(9000);
    const running = tone(`${listen}?start=${unix(Date.now() - 6000)}`, 9);
    const listener = await waitFor(async () => {
      const l = (await api(h, key, 'GET', `/v2/streams/${s.id}/listeners`)).json.data as Array<{ mode: string; protocol: string }>;
      return l.find((x) => x.mode === 'catch_up') ?? null;
    }, 10_000, 200, 'a catch-up listener');
    expect(listener.protocol).toBe('icecast');
    // The listening caps count catch-up listeners: a third connection of this address is 429.
    const held = new AbortController();
    expect((await fetch(`${listen}?start=${unix(Date.now() - 5000)}`, { signal: held.signal })).status).toBe(200);
    const third = await status(`${listen}?start=${unix(Date.now() - 5000)}`);
    expect(third.status).toBe(429);
    held.abort();
    const run = await running;
    expect(run.decoded).toBeGreaterThanOrEqual(8.9);
    expect(Math.abs(run.hz - 880)).toBeLessThan(15);
    expect(Math.abs(run.lastHz - 880)).toBeLessThan(15);
    // 9 s of audio at real-time pace after a 3 s burst: not all at once.
    expect(run.tookMs).toBeGreaterThan(4500);
    await exited(pub2);
    await waitFor(() => isIdle(s.id), 20_000, 200, 'broadcast 2 over');

    // What aired at t: broadcast 1's tone at t1 (Unix seconds), broadcast 2's at t2 (ISO 8601).
    expect(Math.abs((await tone(`${listen}?start=${unix(t1)}`, 3)).hz - 440)).toBeLessThan(15);
    const iso = new Date(unix(t2) * 1000).toISOString().replace('.000Z', 'Z');
    expect(Math.abs((await tone(`${listen}?start=${encodeURIComponent(iso)}`, 3)).hz - 880)).toBeLessThan(15);
    // Near broadcast 1's end, the audio runs on into broadcast 2 (the next kept segment).
    const b1 = ((await api(h, key, 'GET', `/v2/streams/${s.id}/broadcasts`)).json.data as Array<{ endedAt: string }>)[1]!;
    const across = await tone(`${listen}?start=${unix(Date.parse(b1.endedAt)) - 4}`, 8);
    expect(Math.abs(across.hz - 440)).toBeLessThan(15);
    expect(Math.abs(across.lastHz - 880)).toBeLessThan(15);

    // mpv shows the title that aired then.
    for (const [t, title] of [[t1, 'Tone 440'], [t2, 'Tone 880']] as const) {
      const mpv = await runCommand('mpv', ['--no-config', '--no-video', '--ao=null', '--length=4', '--msg-level=all=info', `${listen}?start=${unix(t)}`]);
      expect(mpv.code, mpv.out).toBe(0);
      expect(mpv.out).toMatch(new RegExp(`icy-title: ${title}`));
    }

    // The Icecast port: the stream's own mount and /live/<id>, with ?start=.
    for (const path of [`/tones.mp3?start=${unix(t1)}`, `/live/${s.id}?start=${unix(t1)}`]) {
      expect(Math.abs((await tone(`${server.icecast}${path}`, 3)).hz - 440), path).toBeLessThan(15);
    }
    expect(Math.abs((await tone(`${server.icecast}/tones.mp3?start=${unix(t2)}`, 3)).hz - 880)).toBeLessThan(15);

    // Refusals: before the window, after now, catch-up off, another codec → 404; malformed → 400.
    const now = Date.now();
    expect((await status(`${listen}?start=${unix(now - 2 * 3_600_000)}`)).status).toBe(404);
    expect((await status(`${listen}?start=${unix(now + 600_000)}`)).status).toBe(404);
    expect((await status(`${h}/listen/${off.id}.mp3?start=${unix(t1)}`)).status).toBe(404);
    expect((await status(`${h}/listen/${s.id}.aac?start=${unix(t1)}`)).status).toBe(404);
    const bad = await status(`${listen}?start=yesterday`);
    expect(bad.status).toBe(400);
    expect(bad.body).toContain('parameter_invalid');
    expect((await status(`${listen}?start=2026-13-45T99:00:00Z`)).status).toBe(400);
    const ok = await status(`${listen}?start=${unix(t1)}`);
    expect(ok).toMatchObject({ status: 200, type: 'audio/mpeg' });

    // A token stream: 401 without the token, 403 with a bad one, 200 with its listener token (ADTS AAC).
    const tkListen = `${h}/listen/${tk.id}.aac?start=${unix(t1 - 1000)}`;
    expect((await status(tkListen)).status).toBe(401);
    expect((await status(`${tkListen}&token=nope`)).status).toBe(403);
    const token = (await api(h, key, 'POST', `/v2/streams/${tk.id}/listener_tokens`)).json.token as string;
    expect(Math.abs((await tone(`${tkListen}&token=${token}`, 2)).hz - 440)).toBeLessThan(15);
    made = { key, id: s.id, t1 };
  }, 240_000);

  it('cuts a catch-up listener that stops reading, as live listening does', async () => {
    const { key, id, t1 } = made!;
    const refusals = async () => {
      const text = await (await fetch(`${server!.http}/metrics`, { headers: { Authorization: `Bearer ${key}` } })).text();
      return Number(/skylark_refusals_total\{limit="listen_slow_client"\} (\d+)/.exec(text)?.[1] ?? 0);
    };
    const before = await refusals();
    // A raw socket on the Icecast port that reads the response head, then nothing (a tiny receive
    // buffer and MSS, as the live test does, so that the stall is seen by the server within seconds).
    const u = new URL(`${server!.icecast}/live/${id}?start=${unix(t1) - 2}`);
    const py = spawn('python3', ['-c', `
import socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, 536)
s.connect(('127.0.0.1', ${u.port}))
s.sendall(b'GET ${u.pathname}${u.search} HTTP/1.0\\r\\nHost: x\\r\\n\\r\\n')
print(s.recv(200)[:15].decode(), flush=True)
time.sleep(60)
`], { stdio: ['ignore', 'pipe', 'inherit'] });
    try {
      const head = await new Promise<string>((r) => py.stdout!.once('data', (d) => r(String(d))));
      expect(head).toMatch(/^HTTP\/1.0 200/);
      await waitFor(async () => (await refusals()) > before || null, 45_000, 500, 'the slow catch-up listener to be cut');
    } finally {
      py.kill('SIGKILL');
    }
  }, 60_000);
});
