/**
 * A stream's own Icecast mount (docs/icecast.md "Mounts"), with real clients against a real server:
 * - the API: `icecastMount` set on create and PATCH, answered on the stream, refused when unsafe or
 *   reserved (400), when another stream has it (409 `icecast_mount_taken` naming it), removed by null;
 * - ezstream publishes MP3 to `/radio.mp3` with the stream key; mpv and FFmpeg listen at
 *   `/radio.mp3` on the Icecast port and get MP3 audio; `updinfo` with `mount=/radio.mp3` sets the
 *   title; `/status-json.xsl` lists the stream under its mount;
 * - a source with a valid stream key on a mount no stream has → 404 naming the mount; a wrong key
 *   on a known mount → 401, as no credentials.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChildProcess } from 'node:child_process';
import { api, startInProcess, tempDir, waitFor, type TestServer } from '../../helpers/server.js';
import { ffmpegPath } from '../../helpers/ffmpeg.js';
import { basicAuth as basic, ezstreamSource, rawIcecast, runCommand as run } from '../../helpers/icecast-clients.js';

let t: TestServer;
let port: number;
const tmp = tempDir('skylark-mounts-');
const children: ChildProcess[] = [];

interface Stream {
  id: string;
  streamKey: string;
  icecastMount: string | null;
}

const raw = (request: string, limit?: number) => rawIcecast(port, request, limit);
const status = async (id: string) => (await api(t.http, t.secretKey, 'GET', `/v2/streams/${id}`)).json.status as string;
/** ezstream publishing MP3 to `mount` (killed after the tests). */
function ezstream(mount: string, key: string, seconds: number) {
  const ez = ezstreamSource(tmp.dir, port, mount, key, seconds);
  children.push(ez.p);
  return ez;
}

beforeAll(async () => {
  t = await startInProcess({ SKYLARK_ABR_LADDER: '0' });
  port = t.server.icecastPort;
});

afterAll(async () => {
  for (const c of children) c.kill('SIGKILL');
  await t?.close();
  tmp.cleanup();
});

describe('icecastMount in the API', () => {
  it('is set on create and PATCH, answered on the stream, and null removes it', async () => {
    const created = await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Mounted', codec: 'mp3', icecastMount: '/stream' });
    expect(created.status).toBe(201);
    const s = created.json as Stream;
    expect(s.icecastMount).toBe('/stream');
    expect((await api(t.http, t.secretKey, 'GET', `/v2/streams/${s.id}`)).json.icecastMount).toBe('/stream');
    const plain = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Plain', codec: 'mp3' })).json as Stream;
    expect(plain.icecastMount).toBeNull();
    const moved = await api(t.http, t.secretKey, 'PATCH', `/v2/streams/${s.id}`, { icecastMount: '/music/jazz-1.mp3' });
    expect(moved.status).toBe(200);
    expect(moved.json.icecastMount).toBe('/music/jazz-1.mp3');
    // Its own mount again: no conflict with itself.
    expect((await api(t.http, t.secretKey, 'PATCH', `/v2/streams/${s.id}`, { icecastMount: '/music/jazz-1.mp3' })).status).toBe(200);
    const removed = await api(t.http, t.secretKey, 'PATCH', `/v2/streams/${s.id}`, { icecastMount: null });
    expect(removed.json.icecastMount).toBeNull();
    // A removed mount is free for another stream.
    expect((await api(t.http, t.secretKey, 'PATCH', `/v2/streams/${plain.id}`, { icecastMount: '/music/jazz-1.mp3' })).json.icecastMount).toBe('/music/jazz-1.mp3');
  });

  it('a mount another stream has → 409 icecast_mount_taken naming it, on create and on PATCH', async () => {
    await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'First', codec: 'mp3', icecastMount: '/taken' });
    const dup = await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Second', codec: 'mp3', icecastMount: '/taken' });
    expect(dup.status).toBe(409);
    expect(dup.json.error).toMatchObject({ type: 'conflict_error', code: 'icecast_mount_taken', param: 'icecastMount' });
    expect(dup.json.error.message).toContain('/taken');
    const other = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Third', codec: 'mp3' })).json as Stream;
    const patch = await api(t.http, t.secretKey, 'PATCH', `/v2/streams/${other.id}`, { icecastMount: '/taken' });
    expect(patch.status).toBe(409);
    expect(patch.json.error.message).toContain('/taken');
    expect((await api(t.http, t.secretKey, 'GET', `/v2/streams/${other.id}`)).json.icecastMount).toBeNull();
  });

  it('an unsafe or reserved mount → 400 parameter_invalid on icecastMount', async () => {
    const bad = ['stream', '/', '/live/x', '/live', '/admin', '/admin/metadata', '/administrator', '/status-json.xsl', '/a b', '/a/../b', '/./a', '/a//b', '/a/', '/ü', `/${'a'.repeat(64)}`, 42];
    for (const icecastMount of bad) {
      const r = await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Bad', codec: 'mp3', icecastMount });
      expect(r.status, String(icecastMount)).toBe(400);
      expect(r.json.error, String(icecastMount)).toMatchObject({ code: 'parameter_invalid', param: 'icecastMount' });
    }
    expect((await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Longest', codec: 'mp3', icecastMount: `/${'a'.repeat(63)}` })).status).toBe(201);
    expect((await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Live-ish', codec: 'mp3', icecastMount: '/liveradio.mp3' })).status).toBe(201);
  });
});

describe('a source and listeners on a stream’s own mount', () => {
  it('ezstream publishes MP3 to /radio.mp3; mpv and FFmpeg hear it there; updinfo and /status-json.xsl use the mount', async () => {
    const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Radio MP3', codec: 'mp3', quality: 'medium', reconnectWindow: 0, icecastMount: '/radio.mp3' })).json as Stream;
    const ez = ezstream('/radio.mp3', s.streamKey, 60);
    await waitFor(async () => (await status(s.id)) === 'live', 20_000, 100, `ezstream live (${ez.err()})`);
    await waitFor(async () => /^HTTP\/1\.0 200/.test((await raw('HEAD /radio.mp3 HTTP/1.0\r\n\r\n')).head) || null, 20_000, 250, 'the mount to serve');

    const first = await raw('GET /radio.mp3 HTTP/1.0\r\n\r\n', 8000);
    expect(first.head).toMatch(/^HTTP\/1\.0 200 OK/);
    expect(first.head).toMatch(/Content-Type: audio\/mpeg/i);
    expect(first.head).toMatch(/icy-name: Radio MP3/i);
    expect(first.body[0]).toBe(0xff); // an MP3 frame sync

    const url = `http://127.0.0.1:${port}/radio.mp3`;
    const mpv = await run('mpv', ['--no-config', '--no-video', '--ao=null', '--length=3', url]);
    expect(mpv.code, mpv.out).toBe(0);
    expect(mpv.out).toMatch(/Audio.*mp3/);
    const ff = await run(ffmpegPath(), ['-nostdin', '-hide_banner', '-v', 'error', '-i', url, '-t', '2', '-f', 'null', '-']);
    expect(ff).toEqual({ code: 0, out: '' });

    const upd = await raw(`GET /admin/metadata?mount=/radio.mp3&mode=updinfo&song=Trio%20-%20Tune HTTP/1.0\r\nAuthorization: ${basic('source', s.streamKey)}\r\n\r\n`);
    expect(upd.head).toMatch(/^HTTP\/1\.0 200/);
    await waitFor(async () => (await api(t.http, t.secretKey, 'GET', `/v2/streams/${s.id}`)).json.nowPlaying?.title === 'Tune', 5000, 100, 'the updinfo title');

    const st = JSON.parse((await raw('GET /status-json.xsl HTTP/1.0\r\n\r\n')).body.toString('utf8')) as { icestats: { source: Array<{ listenurl: string; server_name: string }> } };
    const entry = st.icestats.source.find((x) => x.server_name === 'Radio MP3');
    expect(entry?.listenurl).toBe(`http://127.0.0.1:${port}/radio.mp3`);
    // `/live/<id>` still works beside the mount.
    expect((await raw(`GET /live/${s.id} HTTP/1.0\r\n\r\n`, 2000)).head).toMatch(/^HTTP\/1\.0 200/);
    ez.p.kill('SIGTERM');
  }, 120_000);

  it('a valid key on a mount no stream has → 404 naming it; a wrong key on a known mount → 401', async () => {
    const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Known', codec: 'mp3', icecastMount: '/known.mp3' })).json as Stream;
    const put = (mount: string, authz: string | null) =>
      raw(`PUT ${mount} HTTP/1.1\r\nHost: x\r\n${authz ? `Authorization: ${authz}\r\n` : ''}Content-Type: audio/mpeg\r\nExpect: 100-continue\r\n\r\n`);
    const unknown = await put('/nowhere.mp3', basic('source', s.streamKey));
    expect(unknown.head).toMatch(/^HTTP\/1\.0 404/);
    expect(unknown.body.toString()).toContain('/nowhere.mp3');
    expect(unknown.head).not.toContain('100 Continue');
    // Without a valid key the mount's existence is not told: 401, as for any refused source.
    expect((await put('/nowhere.mp3', basic('source', 'sk_euw1_nope'))).head).toMatch(/^HTTP\/1\.0 401/);
    expect((await put('/nowhere.mp3', null)).head).toMatch(/^HTTP\/1\.0 401/);
    const wrong = await put('/known.mp3', basic('source', 'sk_euw1_nope'));
    expect(wrong.head).toMatch(/^HTTP\/1\.0 401/);
    expect(wrong.head).toMatch(/WWW-Authenticate: Basic/i);
    expect((await put('/known.mp3', null)).head).toMatch(/^HTTP\/1\.0 401/);
    // A listener on a mount no stream has: 404 naming it; on an idle stream's mount: 404.
    const listener = await raw('GET /nowhere.mp3 HTTP/1.0\r\n\r\n');
    expect(listener.head).toMatch(/^HTTP\/1\.0 404/);
    expect(listener.body.toString()).toContain('/nowhere.mp3');
    expect((await raw('GET /known.mp3 HTTP/1.0\r\n\r\n')).head).toMatch(/^HTTP\/1\.0 404/);
  });
});
