/**
 * A new source starts without a title (docs/icecast.md "Titles from sources"): when another
 * publisher takes over a live stream — an RTMP publish replacing an Icecast source, an Icecast
 * source replacing an RTMP publish — and sends no title, the stream's `nowPlaying` becomes null
 * (with a `stream.now_playing` event) instead of keeping the previous source's title; a title the
 * new source does send is taken as usual.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import { api, startInProcess, waitFor, type TestServer } from '../../helpers/server.js';
import { publish } from '../../helpers/publish.js';
import { ffmpegPath } from '../../helpers/ffmpeg.js';

let t: TestServer;
const children: ChildProcess[] = [];

beforeAll(async () => {
  t = await startInProcess({ SKYLARK_ABR_LADDER: '0' });
});
afterAll(async () => {
  for (const c of children) c.kill('SIGKILL');
  await t?.close();
});

const MP3 = ['-ac', '2', '-ar', '44100', '-c:a', 'libmp3lame', '-b:a', '128k'];

function icecastSource(url: string, seconds: number): ChildProcess {
  const p = spawn(ffmpegPath(), ['-hide_banner', '-loglevel', 'error', '-re', '-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=44100', '-t', String(seconds), ...MP3, '-content_type', 'audio/mpeg', '-f', 'mp3', url], { stdio: ['ignore', 'ignore', 'pipe'] });
  children.push(p);
  return p;
}

/** `updinfo` on the Icecast port; resolves to the status line. */
function updinfo(port: number, id: string, key: string, song: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1', () =>
      s.write(`GET /admin/metadata?mount=/live/${id}&mode=updinfo&song=${encodeURIComponent(song)} HTTP/1.0\r\nAuthorization: Basic ${Buffer.from(`source:${key}`).toString('base64')}\r\n\r\n`),
    );
    let got = '';
    s.on('data', (d) => (got += d.toString('latin1')));
    s.on('close', () => resolve(got.split('\r\n')[0]!));
    s.on('error', reject);
  });
}

describe('a new source clears the previous title', () => {
  it('Icecast source with a title → RTMP publish without one → null; RTMP with a title → Icecast source without one → null', async () => {
    const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Handover', codec: 'mp3', quality: 'medium', reconnectWindow: 30 })).json as { id: string; streamKey: string; rtmpUrl: string };
    const port = t.server.icecastPort;
    const get = async () => (await api(t.http, t.secretKey, 'GET', `/v2/streams/${s.id}`)).json as { status: string; nowPlaying: { title: string } | null };

    icecastSource(`icecast://source:${s.streamKey}@127.0.0.1:${port}/live/${s.id}`, 60);
    await waitFor(async () => (await get()).status === 'live', 15_000, 100, 'live');
    expect(await updinfo(port, s.id, s.streamKey, 'Old Artist - Old Song')).toMatch(/200 OK/);
    await waitFor(async () => (await get()).nowPlaying?.title === 'Old Song', 5000, 100, 'the Icecast title');

    // An RTMP publisher takes over (the newest wins) and sends no title.
    const rtmp = publish(`${s.rtmpUrl}/${s.streamKey}`, { seconds: 60, codecArgs: MP3 });
    children.push(rtmp);
    await waitFor(async () => ((await get()).nowPlaying === null ? true : null), 15_000, 100, 'nowPlaying cleared by the RTMP source');
    expect((await get()).status).toBe('live');

    // An RTMP publisher with a title (onMetaData) takes over: its title is taken.
    const titled = publish(`${s.rtmpUrl}/${s.streamKey}`, { seconds: 60, codecArgs: [...MP3, '-metadata', 'title=Rtmp Song'] });
    children.push(titled);
    await waitFor(async () => (await get()).nowPlaying?.title === 'Rtmp Song', 15_000, 100, 'the RTMP title');

    // An Icecast source takes over without a title (no updinfo): cleared again.
    icecastSource(`icecast://source:${s.streamKey}@127.0.0.1:${port}/live/${s.id}`, 60);
    await waitFor(async () => ((await get()).nowPlaying === null ? true : null), 15_000, 100, 'nowPlaying cleared by the Icecast source');

    const events = (await api(t.http, t.secretKey, 'GET', '/v2/events?type=stream.now_playing')).json.data as Array<{ data: { object: { id: string; nowPlaying: { title: string } | null } } }>;
    const mine = events.filter((e) => e.data.object.id === s.id).map((e) => e.data.object.nowPlaying?.title ?? null);
    // Newest first.
    expect(mine).toEqual([null, 'Rtmp Song', null, 'Old Song']);
  }, 90_000);
});
