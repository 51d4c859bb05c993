/**
 * What a shared cache may keep (docs/behaviour.md §12), against a live AAC stream published by FFmpeg
 * (SKYLARK_ABR_LADDER=0: one LL-HLS layer, 2 s segments, 0.5 s parts):
 * - a blocking reload answered because the requested part exists is `public, max-age=<target
 *   duration>` and its body does not depend on the session id (two sessions, one answer);
 * - a blocking reload answered because the wait timed out (the publisher went away inside its
 *   reconnect window) is `no-store` and does not list the part it asked for;
 * - the multivariant playlist, which carries a freshly minted session id, is `private`;
 * - token streams stay `private, no-store` on blocking reloads too.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChildProcess } from 'node:child_process';
import { api, startInProcess, waitFor, type TestServer } from '../../helpers/server.js';
import { exited, publish } from '../../helpers/publish.js';

let t: TestServer;
const pubs: ChildProcess[] = [];

const text = async (url: string) => {
  const r = await fetch(url);
  return { status: r.status, cacheControl: r.headers.get('cache-control'), body: await r.text() };
};
const hintOf = (playlist: string) => {
  const m = /#EXT-X-PRELOAD-HINT:TYPE=PART,URI="(\d+)\.(\d+)\.m4s[^"]*"/.exec(playlist)!;
  return { msn: Number(m[1]), part: Number(m[2]) };
};

/** A live stream (`body` of POST /streams) and its media playlist URL as a new session gets it. */
async function live(body: Record<string, unknown>, query = ''): Promise<{ stream: any; pub: ChildProcess }> {
  const stream = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Edge cache', latencyMode: 'low', ...body })).json;
  const pub = publish(`${stream.rtmpUrl}/${stream.streamKey}`, { seconds: 60 });
  pubs.push(pub);
  await waitFor(async () => {
    const mv = await fetch(`${stream.hlsUrl}${query}`);
    if (mv.status !== 200) return false;
    const uri = (await mv.text()).split('\n').find((l) => l && !l.startsWith('#'))!;
    return (await text(new URL(uri, stream.hlsUrl).toString())).body.includes('#EXT-X-PART:');
  }, 20_000, 200, 'parts');
  return { stream, pub };
}

/** The media playlist URL of a new session (the variant URI of a fresh multivariant fetch). */
async function session(hlsUrl: string, query = ''): Promise<{ url: string; cacheControl: string | null }> {
  const mv = await text(`${hlsUrl}${query}`);
  const uri = mv.body.split('\n').find((l) => l && !l.startsWith('#'))!;
  return { url: new URL(uri, hlsUrl).toString(), cacheControl: mv.cacheControl };
}

beforeAll(async () => {
  t = await startInProcess({ SKYLARK_ABR_LADDER: '0' });
});
afterAll(async () => {
  for (const p of pubs) {
    p.kill('SIGKILL');
    await exited(p);
  }
  await t?.close();
});

describe('Cache-Control for shared caches (docs/behaviour.md §12)', () => {
  it('a blocking reload answered with its part is public for one target duration and the same for every session; the multivariant is private', async () => {
    const { stream } = await live({ reconnectWindow: 1 });
    const a = await session(stream.hlsUrl);
    const b = await session(stream.hlsUrl);
    expect(a.url).not.toBe(b.url); // two sessions
    expect(a.cacheControl).toBe('private, max-age=1');
    for (let i = 0; i < 3; i++) {
      const h = hintOf((await text(a.url)).body);
      const q = `&_HLS_msn=${h.msn}&_HLS_part=${h.part}`;
      const [ra, rb] = await Promise.all([text(a.url + q), text(b.url + q)]);
      expect(ra.status).toBe(200);
      expect(ra.cacheControl).toBe('public, max-age=2');
      expect(rb.cacheControl).toBe('public, max-age=2');
      expect(ra.body).toMatch(new RegExp(`#EXT-X-PART:[^\\n]*URI="${h.msn}\\.${h.part}\\.m4s"`));
      // Depends only on the path and the directives: either answer could be served to the other.
      expect(rb.body).toBe(ra.body);
      // Asked again later (a cache miss at another edge): still lists the part, still shareable.
      const again = await text(a.url + q);
      expect(again.cacheControl).toBe('public, max-age=2');
      expect(again.body).toMatch(new RegExp(`#EXT-X-PART:[^\\n]*URI="${h.msn}\\.${h.part}\\.m4s"`));
    }
    // A non-blocking reload of an LL-HLS layer is not kept by a cache.
    expect((await text(a.url)).cacheControl).toBe('no-cache');
  });

  it('a blocking reload answered because the wait timed out is no-store and lacks the part', async () => {
    const { stream, pub } = await live({ reconnectWindow: 60 });
    const s = await session(stream.hlsUrl);
    pub.kill('SIGKILL'); // the stream stays live (reconnect window) but no part comes
    await exited(pub);
    // What the publisher sent before it died is in the playlist: it stopped changing.
    let last = '';
    await waitFor(async () => {
      const now = (await text(s.url)).body;
      const same = now === last;
      last = now;
      return same;
    }, 10_000, 300, 'the playlist stopped changing');
    const h = hintOf((await text(s.url)).body);
    const r = await text(`${s.url}&_HLS_msn=${h.msn}&_HLS_part=${h.part}`); // held 3 target durations, then answered
    expect(r.status).toBe(200);
    expect(r.cacheControl).toBe('no-store');
    expect(r.body).not.toMatch(new RegExp(`#EXT-X-PART:[^\\n]*URI="${h.msn}\\.${h.part}\\.m4s"`));
    expect(r.body).toContain(`#EXT-X-PRELOAD-HINT:TYPE=PART,URI="${h.msn}.${h.part}.m4s"`); // still the next part
  }, 30_000);

  it('token streams: blocking reloads stay private, no-store', async () => {
    const stream0 = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'tok', playback: 'token', reconnectWindow: 1, latencyMode: 'low' })).json;
    const token = (await api(t.http, t.secretKey, 'POST', `/v2/streams/${stream0.id}/listener_tokens`)).json.token as string;
    const pub = publish(`${stream0.rtmpUrl}/${stream0.streamKey}`, { seconds: 60 });
    pubs.push(pub);
    await waitFor(async () => (await text(`${stream0.hlsUrl}?token=${token}`)).status === 200, 20_000, 200, 'HLS');
    const s = await session(stream0.hlsUrl, `?token=${token}`);
    expect(s.cacheControl).toBe('private, no-store');
    await waitFor(async () => (await text(s.url)).body.includes('#EXT-X-PART:'), 20_000, 200, 'parts');
    const h = hintOf((await text(s.url)).body);
    const r = await text(`${s.url}&_HLS_msn=${h.msn}&_HLS_part=${h.part}`);
    expect(r.status).toBe(200);
    expect(r.cacheControl).toBe('private, no-store');
  });
});
