/**
 * Icecast source ingest (docs/behaviour.md §10 "Ingest") with real source clients against a real server:
 * FFmpeg's `icecast://` output for MP3, ADTS and Ogg Opus, libshout's `shout`, ezstream and
 * Liquidsoap. Each makes the stream `live`, and its HLS decodes; wrong credentials → 401; another
 * codec's `Content-Type` → 415 and `stream.error` `codec_mismatch`; the newest source wins over an
 * RTMP publisher; the admin `updinfo` call sets the stream's now-playing title, and Liquidsoap's
 * metadata updates (a playlist of tagged MP3s) move `nowPlaying` and the play log (docs/behaviour.md §11).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { api, startInProcess, tempDir, waitFor, type TestServer } from '../../helpers/server.js';
import { exited, publish } from '../../helpers/publish.js';
import { ffmpegPath } from '../../helpers/ffmpeg.js';

const SINE = ['-re', '-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=48000'];
const ENCODE = {
  mp3: ['-ac', '2', '-ar', '44100', '-c:a', 'libmp3lame', '-b:a', '128k', '-content_type', 'audio/mpeg', '-f', 'mp3'],
  aac: ['-ac', '2', '-c:a', 'aac', '-b:a', '128k', '-content_type', 'audio/aac', '-f', 'adts'],
  opus: ['-ac', '2', '-c:a', 'libopus', '-b:a', '128k', '-content_type', 'audio/ogg', '-f', 'ogg'],
} as const;

type Codec = keyof typeof ENCODE;

function ffmpegSource(url: string, codec: Codec, seconds: number, extra: string[] = []): ChildProcess {
  return spawn(ffmpegPath(), ['-hide_banner', '-loglevel', 'error', ...SINE, '-t', String(seconds), ...ENCODE[codec], ...extra, url], { stdio: ['ignore', 'ignore', 'pipe'] });
}

async function stream(t: TestServer, codec: Codec, extra: Record<string, unknown> = {}) {
  return (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: `Radio ${codec}`, codec, quality: 'medium', reconnectWindow: 0, ...extra })).json as {
    id: string;
    streamKey: string;
    hlsUrl: string;
    rtmpUrl: string;
  };
}

const status = async (t: TestServer, id: string) => (await api(t.http, t.secretKey, 'GET', `/v2/streams/${id}`)).json.status as string;

/** Whether the stream's top layer lists at least one whole segment (FFmpeg 5.1 cannot start on LL-HLS parts alone). */
async function hasSegment(hlsUrl: string): Promise<boolean> {
  const mv = await fetch(hlsUrl);
  if (mv.status !== 200) return false;
  const variant = (await mv.text()).split('\n').find((l) => l && !l.startsWith('#'));
  if (!variant) return false;
  const media = await fetch(new URL(variant, hlsUrl));
  return media.status === 200 && (await media.text()).includes('#EXTINF');
}

/** Decodes 2 s of the stream's HLS with FFmpeg (a child process: the server runs in this one); resolves to its exit code and errors. */
async function decodeHls(hlsUrl: string): Promise<{ code: number | string | null; errors: string }> {
  const p = spawn(ffmpegPath(), ['-nostdin', '-hide_banner', '-loglevel', 'error', '-i', hlsUrl, '-t', '2', '-f', 'null', '-'], { stdio: ['ignore', 'ignore', 'pipe'] });
  let errors = '';
  p.stderr!.on('data', (d) => (errors += d));
  return { code: await exited(p), errors };
}

/** One raw HTTP exchange with the Icecast port: sends `head` (and `body`), resolves to what came back until close. */
function rawExchange(port: number, head: string, body?: Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1', () => {
      s.write(head);
      if (body) s.write(body);
    });
    let got = '';
    s.on('data', (d) => (got += d.toString('latin1')));
    s.on('close', () => resolve(got));
    s.on('error', reject);
    setTimeout(() => s.destroy(), 5000).unref();
  });
}

describe('Icecast source ingest', () => {
  let t: TestServer;
  let port: number;
  const tmp = tempDir('skylark-icecast-');
  const children: ChildProcess[] = [];
  beforeAll(async () => {
    t = await startInProcess({ SKYLARK_ABR_LADDER: '0' });
    port = t.server.icecastPort;
  });
  afterAll(async () => {
    for (const c of children) c.kill('SIGKILL');
    await t?.close();
    tmp.cleanup();
  });

  for (const codec of ['mp3', 'aac', 'opus'] as const) {
    it(`FFmpeg icecast:// ${codec}: live, and its HLS decodes`, async () => {
      const s = await stream(t, codec);
      const src = ffmpegSource(`icecast://source:${s.streamKey}@127.0.0.1:${port}/live/${s.id}`, codec, 8);
      children.push(src);
      await waitFor(async () => (await status(t, s.id)) === 'live', 15_000, 100, `${codec} live`);
      await waitFor(() => hasSegment(s.hlsUrl), 15_000, 200, `${codec} segment`);
      expect(await decodeHls(s.hlsUrl)).toEqual({ code: 0, errors: '' });
      expect(await exited(src)).toBe(0);
    }, 60_000);
  }

  it('wrong key → 401; another codec → 415 and stream.error codec_mismatch', async () => {
    const s = await stream(t, 'mp3');
    const auth = (u: string, p: string) => `Basic ${Buffer.from(`${u}:${p}`).toString('base64')}`;
    const wrong = await rawExchange(port, `PUT /live/${s.id} HTTP/1.1\r\nHost: x\r\nAuthorization: ${auth('source', 'sk_euw1_nope')}\r\nContent-Type: audio/mpeg\r\nExpect: 100-continue\r\n\r\n`);
    expect(wrong).toMatch(/^HTTP\/1\.[01] 401/);
    expect(wrong).toMatch(/WWW-Authenticate: Basic/i);
    expect(wrong).not.toContain('100 Continue');
    const unknown = await rawExchange(port, `SOURCE /live/stm_nope HTTP/1.0\r\nAuthorization: ${auth('source', s.streamKey)}\r\nContent-Type: audio/mpeg\r\n\r\n`);
    expect(unknown).toMatch(/^HTTP\/1\.[01] 401/);
    const ogg = await rawExchange(port, `PUT /live/${s.id} HTTP/1.1\r\nHost: x\r\nAuthorization: ${auth('source', s.streamKey)}\r\nContent-Type: audio/ogg\r\n\r\n`);
    expect(ogg).toMatch(/^HTTP\/1\.[01] 415/);
    const events = await waitFor(async () => {
      const list = (await api(t.http, t.secretKey, 'GET', '/v2/events?type=stream.error')).json.data as Array<{ data: { object: { id: string }; error: { code: string; expected: string; received: string } } }>;
      return list.find((e) => e.data.object.id === s.id);
    }, 5000, 100, 'codec_mismatch');
    expect(events.data.error).toMatchObject({ code: 'codec_mismatch', expected: 'mp3', received: 'opus' });
    expect(await status(t, s.id)).toBe('idle');
  });

  it('the legacy SOURCE method with a raw MP3 body: 200 OK, then live', async () => {
    const s = await stream(t, 'mp3');
    const mp3 = path.join(tmp.dir, 'tone.mp3');
    spawnSync(ffmpegPath(), ['-hide_banner', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', 'sine=duration=4', '-c:a', 'libmp3lame', '-b:a', '128k', mp3]);
    const sock = net.connect(port, '127.0.0.1');
    let reply = '';
    sock.on('data', (d) => (reply += d.toString('latin1')));
    sock.write(`SOURCE /live/${s.id} HTTP/1.0\r\nAuthorization: Basic ${Buffer.from(`source:${s.streamKey}`).toString('base64')}\r\nContent-Type: audio/mpeg\r\nice-name: test\r\n\r\n`);
    sock.write(readFileSync(mp3));
    await waitFor(() => reply.startsWith('HTTP/1.0 200 OK'), 5000, 20, '200 OK');
    await waitFor(async () => (await status(t, s.id)) === 'live', 10_000, 100, 'live');
    sock.destroy();
  });

  it("libshout's shout (PUT, Ogg Opus) and ezstream (MP3) publish", async () => {
    for (const client of ['shout', 'ezstream'] as const) {
      const s = await stream(t, client === 'shout' ? 'opus' : 'mp3');
      let p: ChildProcess;
      if (client === 'shout') {
        // This libshout's `shout` tool takes Ogg (its MP3 mode is refused by the library build).
        const enc = spawn(ffmpegPath(), ['-hide_banner', '-loglevel', 'error', ...SINE, '-t', '8', '-ac', '2', '-c:a', 'libopus', '-b:a', '128k', '-f', 'ogg', '-'], { stdio: ['ignore', 'pipe', 'ignore'] });
        p = spawn('shout', ['--host', '127.0.0.1', '--port', String(port), '--mount', `/live/${s.id}`, '--user', 'source', '--pass', s.streamKey, '--format', 'ogg', '--proto', 'http'], { stdio: ['pipe', 'ignore', 'pipe'] });
        enc.stdout!.pipe(p.stdin!);
        p.stdin!.on('error', () => {});
        children.push(enc);
      } else {
        const mp3 = path.join(tmp.dir, 'ez.mp3');
        spawnSync(ffmpegPath(), ['-hide_banner', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', 'sine=duration=8', '-ac', '2', '-c:a', 'libmp3lame', '-b:a', '128k', mp3]);
        const conf = path.join(tmp.dir, 'ezstream.xml');
        writeFileSync(
          conf,
          `<ezstream>
  <servers><server><protocol>HTTP</protocol><hostname>127.0.0.1</hostname><port>${port}</port><user>source</user><password>${s.streamKey}</password></server></servers>
  <streams><stream><mountpoint>/live/${s.id}</mountpoint><format>MP3</format></stream></streams>
  <intakes><intake><type>file</type><filename>${mp3}</filename><stream_once>yes</stream_once></intake></intakes>
</ezstream>
`,
          { mode: 0o600 },
        );
        p = spawn('ezstream', ['-c', conf], { stdio: ['ignore', 'ignore', 'pipe'] });
      }
      children.push(p);
      let err = '';
      p.stderr!.on('data', (d) => (err += d));
      await waitFor(async () => (await status(t, s.id)) === 'live', 15_000, 100, `${client} live (${err})`);
      await waitFor(() => hasSegment(s.hlsUrl), 15_000, 200, `${client} segment`);
      expect(await decodeHls(s.hlsUrl)).toEqual({ code: 0, errors: '' });
      p.kill('SIGTERM');
    }
  }, 90_000);

  it('Liquidsoap output.icecast publishes MP3', async () => {
    const s = await stream(t, 'mp3');
    const script = path.join(tmp.dir, 'radio.liq');
    writeFileSync(
      script,
      `settings.init.allow_root.set(true)
settings.log.stdout.set(true)
output.icecast(%mp3(bitrate=128), host="127.0.0.1", port=${port}, user="source", password="${s.streamKey}", mount="/live/${s.id}", sine())
`,
    );
    const p = spawn('liquidsoap', [script], { stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(p);
    let out = '';
    p.stdout!.on('data', (d) => (out += d));
    p.stderr!.on('data', (d) => (out += d));
    await waitFor(async () => (await status(t, s.id)) === 'live', 30_000, 200, `liquidsoap live: ${out.slice(-500)}`);
    await waitFor(() => hasSegment(s.hlsUrl), 15_000, 200, 'liquidsoap segment');
    expect(await decodeHls(s.hlsUrl)).toEqual({ code: 0, errors: '' });
    p.kill('SIGTERM');
  }, 90_000);

  it("Liquidsoap's metadata updates from a playlist of tagged MP3s: nowPlaying and the play log follow them", async () => {
    const s = await stream(t, 'mp3');
    const files = [
      ['one.mp3', 'Track One', 'Artist A'],
      ['two.mp3', 'Track Two', 'Artist B'],
    ].map(([name, title, artist]) => {
      const f = path.join(tmp.dir, name!);
      spawnSync(ffmpegPath(), ['-hide_banner', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', 'sine=duration=4', '-ac', '2', '-ar', '44100', '-c:a', 'libmp3lame', '-b:a', '128k', '-metadata', `title=${title}`, '-metadata', `artist=${artist}`, f]);
      return f;
    });
    const list = path.join(tmp.dir, 'list.m3u');
    writeFileSync(list, `${files.join('\n')}\n`);
    const script = path.join(tmp.dir, 'playlist.liq');
    writeFileSync(
      script,
      `settings.init.allow_root.set(true)
settings.log.stdout.set(true)
radio = playlist(mode="normal", reload_mode="never", "${list}")
output.icecast(%mp3(bitrate=128), host="127.0.0.1", port=${port}, user="source", password="${s.streamKey}", mount="/live/${s.id}", fallible=true, radio)
`,
    );
    const p = spawn('liquidsoap', [script], { stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(p);
    let out = '';
    p.stdout!.on('data', (d) => (out += d));
    p.stderr!.on('data', (d) => (out += d));
    const np = () => api(t.http, t.secretKey, 'GET', `/v2/streams/${s.id}`).then((r) => r.json.nowPlaying as { title: string; artist: string | null } | null);
    await waitFor(async () => (await np())?.title === 'Track One', 30_000, 100, `Track One (${out.slice(-500)})`);
    expect(await np()).toMatchObject({ title: 'Track One', artist: 'Artist A' });
    await waitFor(async () => (await np())?.title === 'Track Two', 20_000, 100, `Track Two (${out.slice(-500)})`);
    expect(await np()).toMatchObject({ title: 'Track Two', artist: 'Artist B' });
    const tracks = (await api(t.http, t.secretKey, 'GET', `/v2/streams/${s.id}/tracks`)).json.data as Array<{ title: string; artist: string; startedAt: string; endedAt: string | null }>;
    const oldestFirst = [...tracks].reverse();
    expect(oldestFirst.slice(0, 2).map((x) => [x.artist, x.title])).toEqual([
      ['Artist A', 'Track One'],
      ['Artist B', 'Track Two'],
    ]);
    expect(oldestFirst[0]!.endedAt).toBe(oldestFirst[1]!.startedAt);
    p.kill('SIGTERM');
  }, 90_000);

  it('the newest source wins across protocols: an Icecast source replaces an RTMP publisher', async () => {
    const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Takeover', codec: 'aac', reconnectWindow: 10 })).json;
    const rtmp = publish(`${s.rtmpUrl}/${s.streamKey}`, { seconds: 30 });
    children.push(rtmp);
    await waitFor(async () => (await status(t, s.id)) === 'live', 15_000, 100, 'live over RTMP');
    const src = ffmpegSource(`icecast://source:${s.streamKey}@127.0.0.1:${port}/live/${s.id}`, 'aac', 6);
    children.push(src);
    expect(await exited(rtmp)).not.toBe(0); // replaced by the newer source
    expect(await status(t, s.id)).toBe('live');
    expect(await exited(src)).toBe(0);
  }, 60_000);

  it('the admin updinfo call sets nowPlaying (curl-style, with the source credentials)', async () => {
    const s = await stream(t, 'mp3');
    const src = ffmpegSource(`icecast://source:${s.streamKey}@127.0.0.1:${port}/live/${s.id}`, 'mp3', 10);
    children.push(src);
    await waitFor(async () => (await status(t, s.id)) === 'live', 15_000, 100, 'live');
    const auth = `Basic ${Buffer.from(`source:${s.streamKey}`).toString('base64')}`;
    const r = await fetch(`http://127.0.0.1:${port}/admin/metadata?mount=/live/${s.id}&mode=updinfo&song=${encodeURIComponent('Nina Simone - Sinnerman')}`, { headers: { Authorization: auth } });
    expect(r.status).toBe(200);
    expect(await r.text()).toContain('<return>1</return>');
    const bad = await fetch(`http://127.0.0.1:${port}/admin/metadata?mount=/live/${s.id}&mode=updinfo&song=x`, { headers: { Authorization: `Basic ${Buffer.from('source:sk_euw1_wrong').toString('base64')}` } });
    expect(bad.status).toBe(401);
    const np = await waitFor(async () => (await api(t.http, t.secretKey, 'GET', `/v2/streams/${s.id}`)).json.nowPlaying, 5000, 50, 'nowPlaying');
    expect(np).toMatchObject({ title: 'Sinnerman', artist: 'Nina Simone', album: null });
    expect(Date.parse(np.startedAt)).toBeGreaterThan(0);
    src.kill('SIGKILL');
  }, 60_000);
});
