/**
 * Station identity on `/listen` (docs/icecast.md "Station identity"), on every HTTP thread: the
 * headers name the station — `icy-name` is the stream's title, `icy-description`, `icy-genre` and
 * `icy-url` come from its metadata — while the song plays only in the ICY `StreamTitle`.
 * Also run with two HTTP threads (`npm run test:threads`).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChildProcess } from 'node:child_process';
import { api, startInProcess, waitFor, type TestServer } from '../../helpers/server.js';
import { exited, publish } from '../../helpers/publish.js';

let t: TestServer;
const children: ChildProcess[] = [];

beforeAll(async () => {
  t = await startInProcess({ SKYLARK_ABR_LADDER: '0' });
});
afterAll(async () => {
  for (const c of children) c.kill('SIGKILL');
  await Promise.all(children.map((c) => exited(c)));
  await t?.close();
});

describe('/listen names the station, not the song', () => {
  it('icy-name is the title, description/genre/url come from metadata, the song stays in StreamTitle', async () => {
    const metadata = { description: 'Jazz all night', genre: 'Jazz', url: 'https://radio.example/' };
    const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Night FM', codec: 'mp3', quality: 'medium', metadata, reconnectWindow: 1 })).json;
    const pub = publish(`${s.rtmpUrl}/${s.streamKey}`, { seconds: 60, codecArgs: ['-ac', '2', '-ar', '44100', '-c:a', 'libmp3lame', '-b:a', '128k'] });
    children.push(pub);
    const url = `${t.http}/listen/${s.id}.mp3`;
    await waitFor(async () => (await fetch(url, { method: 'HEAD' })).status === 200, 30_000, 200, 'listening');
    const np = await api(t.http, t.secretKey, 'POST', `/v2/streams/${s.id}/now_playing`, { title: 'So What', artist: 'Miles Davis' });
    expect(np.status).toBe(200);
    // Every thread answers alike: ask several times (the kernel spreads connections over threads).
    for (let i = 0; i < 6; i++) {
      const r = await fetch(url, { method: 'HEAD' });
      expect(r.status).toBe(200);
      expect(r.headers.get('icy-name')).toBe('Night FM');
      expect(r.headers.get('icy-description')).toBe('Jazz all night');
      expect(r.headers.get('icy-genre')).toBe('Jazz');
      expect(r.headers.get('icy-url')).toBe('https://radio.example/');
      expect(r.headers.get('access-control-expose-headers')).toMatch(/icy-genre/);
    }
    // The song is in the metadata block.
    const ctrl = new AbortController();
    const r = await fetch(url, { headers: { 'Icy-MetaData': '1' }, signal: ctrl.signal });
    const metaint = Number(r.headers.get('icy-metaint'));
    const reader = r.body!.getReader();
    let buf = Buffer.alloc(0);
    while (buf.length < metaint + 1 + 16 * 255) {
      const { value, done } = await reader.read();
      if (done) break;
      buf = Buffer.concat([buf, Buffer.from(value)]);
    }
    ctrl.abort();
    const len = buf[metaint]! * 16;
    const block = buf.subarray(metaint + 1, metaint + 1 + len).toString('utf8');
    expect(block).toContain("StreamTitle='Miles Davis - So What';");
  }, 60_000);
});
