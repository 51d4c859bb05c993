/**
 * Token-gated playback (docs/behaviour.md §4): a `playback: "token"` stream serves HLS only with a valid
 * listener token for it (401 without, 403 invalid / expired / another stream's), carries the token
 * into every URI it hands out, counts the token's subject as the session, and refuses WHEP without
 * a token (401). Public streams need none.
 * Cache headers (docs/behaviour.md §12): every HLS object of a token stream (multivariant and media
 * playlists, segments, parts, init sections) is `Cache-Control: private, no-store`; a public
 * stream's media objects stay immutable and publicly cacheable, its playlists short-lived.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ListenerTokens } from '../../../src/base/auth/listener-tokens.js';
import { api, startInProcess, waitFor, type TestServer } from '../../helpers/server.js';
import { exited, publish } from '../../helpers/publish.js';

let t: TestServer;

/**
 * `Cache-Control` of every kind of HLS object of a stream, fetched through its multivariant
 * playlist (`query`: e.g. `?token=…`): once the first layer's media playlist lists a segment.
 */
async function cacheControls(hlsUrl: string, query = '') {
  const mv = await fetch(`${hlsUrl}${query}`);
  expect(mv.status).toBe(200);
  const variant = (await mv.text()).split('\n').find((l) => l && !l.startsWith('#'))!;
  const mediaUrl = new URL(variant, hlsUrl);
  const media = await waitFor(async () => {
    const r = await fetch(mediaUrl);
    const body = await r.text();
    return r.status === 200 && /^\d+\.(ts|m4s)/m.test(body) ? { r, body } : null;
  }, 20_000, 200, 'a segment');
  const seg = media.body.split('\n').find((l) => /^\d+\.(ts|m4s)/.test(l))!;
  const part = /#EXT-X-PART:[^\n]*URI="([^"]+)"/.exec(media.body)?.[1];
  const init = /#EXT-X-MAP:URI="([^"]+)"/.exec(media.body)?.[1];
  expect(part, 'an LL-HLS layer lists parts').toBeDefined();
  expect(init, 'an fMP4 layer has an init section').toBeDefined();
  const of = async (uri: string) => {
    const r = await fetch(new URL(uri, mediaUrl));
    expect(r.status, uri).toBe(200);
    await r.arrayBuffer();
    return r.headers.get('cache-control');
  };
  return {
    multivariant: mv.headers.get('cache-control'),
    media: media.r.headers.get('cache-control'),
    segment: await of(seg),
    part: await of(part!),
    init: await of(init!),
  };
}

beforeAll(async () => {
  t = await startInProcess();
});
afterAll(async () => {
  await t?.close();
});

describe('token-gated playback', () => {
  it('refuses HLS and WHEP without a valid token and serves it with one', async () => {
    const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Members only', playback: 'token', reconnectWindow: 1, latencyMode: 'low' })).json;
    expect(s.playback).toBe('token');
    const other = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Other' })).json;
    const pub = publish(`${s.rtmpUrl}/${s.streamKey}`, { seconds: 30 });
    try {
      await waitFor(async () => (await api(t.http, t.secretKey, 'GET', `/v2/streams/${s.id}`)).json.status === 'live', 15_000, 100, 'live');
      const token = (await api(t.http, t.secretKey, 'POST', `/v2/streams/${s.id}/listener_tokens`)).json.token as string;
      const otherToken = (await api(t.http, t.secretKey, 'POST', `/v2/streams/${other.id}/listener_tokens`)).json.token as string;
      const expired = (await new ListenerTokens(t.server.nodeSecret, () => Date.now() - 25 * 3600_000).sign(s.id, 'secret_key')).token;
      const foreign = (await new ListenerTokens(Buffer.alloc(32, 7)).sign(s.id, 'secret_key')).token;

      // Wait for the first full segment with a valid token (the playlist is 404 until the first part).
      await waitFor(async () => (await fetch(`${s.hlsUrl}?token=${token}`)).status === 200, 20_000, 200, 'HLS');
      await waitFor(async () => /^\d+\.m4s/m.test(await (await fetch(new URL(`a128/index.m3u8?token=${token}`, s.hlsUrl))).text()), 20_000, 200, 'a segment');

      const none = await fetch(s.hlsUrl);
      expect(none.status).toBe(401);
      expect(((await none.json()) as any).error.code).toBe('missing_token');
      for (const [bad, code] of [['garbage', 'invalid_token'], [otherToken, 'invalid_token'], [expired, 'token_expired'], [foreign, 'invalid_token']] as const) {
        const r = await fetch(`${s.hlsUrl}?token=${bad}`);
        expect(r.status).toBe(403);
        expect(((await r.json()) as any).error.code).toBe(code);
      }

      const mv = await fetch(`${s.hlsUrl}?token=${token}`);
      expect(mv.status).toBe(200);
      const variant = (await mv.text()).split('\n').find((l) => l && !l.startsWith('#'))!;
      expect(variant).toBe(`a128/index.m3u8?token=${token}`);
      const mediaUrl = new URL(variant, s.hlsUrl);
      const media = await (await fetch(mediaUrl)).text();
      const segs = media.split('\n').filter((l) => /^\d+\.(ts|m4s)/.test(l));
      expect(segs.length).toBeGreaterThan(0);
      for (const l of segs) expect(l).toMatch(new RegExp(`^\\d+\\.(ts|m4s)\\?token=${token.replace(/\./g, '\\.')}$`));
      const seg = await fetch(new URL(segs[0]!, mediaUrl));
      expect(seg.status).toBe(200);
      // Without the token the media playlist and the segments are refused too.
      expect((await fetch(new URL(`a128/index.m3u8`, s.hlsUrl))).status).toBe(401);
      expect((await fetch(new URL(segs[0]!.split('?')[0]!, mediaUrl))).status).toBe(401);
      expect((await fetch(new URL(`${segs[0]!.split('?')[0]}?token=${otherToken}`, mediaUrl))).status).toBe(403);

      // The token's subject is the session: re-fetches count once.
      await fetch(mediaUrl);
      await waitFor(async () => (await api(t.http, t.secretKey, 'GET', `/v2/streams/${s.id}/stats`)).json.totalListeners === 1, 5000, 100, 'one listener');
      expect((await api(t.http, t.secretKey, 'GET', `/v2/streams/${s.id}`)).json.listenerCount).toBe(1);

      // WHEP: 401 without a token or with a bad one (before any SDP work), CORS headers on the refusal.
      const offer = 'v=0\r\no=- 0 0 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\n';
      const w1 = await fetch(`${t.http}/whep/${s.id}`, { method: 'POST', headers: { 'Content-Type': 'application/sdp' }, body: offer });
      expect(w1.status).toBe(401);
      expect(w1.headers.get('access-control-allow-origin')).toBe('*');
      const w2 = await fetch(`${t.http}/whep/${s.id}`, { method: 'POST', headers: { 'Content-Type': 'application/sdp', Authorization: `Bearer ${otherToken}` }, body: offer });
      expect(w2.status).toBe(401);
      const w3 = await fetch(`${t.http}/whep/${s.id}`, { method: 'POST', headers: { 'Content-Type': 'application/sdp', Authorization: `Bearer ${expired}` }, body: offer });
      expect(w3.status).toBe(401);

      // No shared cache may keep any object of a token stream.
      expect(await cacheControls(s.hlsUrl, `?token=${token}`)).toEqual({
        multivariant: 'private, no-store',
        media: 'private, no-store',
        segment: 'private, no-store',
        part: 'private, no-store',
        init: 'private, no-store',
      });
    } finally {
      pub.kill('SIGKILL');
      await exited(pub);
    }
  });

  it('serves public streams without a token', async () => {
    const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Open', reconnectWindow: 1, latencyMode: 'low' })).json;
    expect(s.playback).toBe('public');
    const pub = publish(`${s.rtmpUrl}/${s.streamKey}`, { seconds: 20 });
    try {
      await waitFor(async () => (await fetch(s.hlsUrl)).status === 200, 20_000, 200, 'HLS');
      const mv = await (await fetch(s.hlsUrl)).text();
      expect(mv).toMatch(/a128\/index\.m3u8\?sid=/);
      // Public streams keep their cacheable headers (2 s target duration: playlists ≤ 1 s); the
      // multivariant playlist carries the listener's own session id: private.
      expect(await cacheControls(s.hlsUrl)).toEqual({
        multivariant: 'private, max-age=1',
        media: 'no-cache',
        segment: 'public, max-age=31536000, immutable',
        part: 'public, max-age=31536000, immutable',
        init: 'public, max-age=31536000, immutable',
      });
    } finally {
      pub.kill('SIGKILL');
      await exited(pub);
    }
  });
});
