/**
 * WHIP ingest (RFC 9725; docs/behaviour.md "Go live over WHIP") with a real WebRTC publisher:
 * werift offers a send-only Opus track and sends a real encoded tone; the tone is decoded back at
 * its frequency from HLS and `/listen` by FFmpeg — Opus passed through on an `opus` stream (a WHEP
 * listener receives the very packets sent), encoded from Opus on an `aac` stream. DELETE ends the publish (the stream goes idle); a publish token
 * works for its stream only; the refusals (no or wrong key, another stream's token, no Opus, an
 * offer too large), the video section answered rejected, the CORS preflight and trickle PATCH.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, startInProcess, tempDir, waitFor, type TestServer } from '../../helpers/server.js';
import { decodedFrequency, toneOpusPackets, whepListener, whipConnect, type WhipClient } from '../../helpers/whip-client.js';

let t: TestServer;
const tmp = tempDir('skylark-whip-');
let tone: Buffer[];
beforeAll(async () => {
  t = await startInProcess();
  tone = toneOpusPackets(tmp.dir, 660, 14);
});
afterAll(async () => {
  await t?.close();
  tmp.cleanup();
});

/** Segments listed by the first media playlist of `hlsUrl` (0 before it exists). */
async function segmentCount(hlsUrl: string): Promise<number> {
  const master = await fetch(hlsUrl);
  if (master.status !== 200) return 0;
  const first = (await master.text()).split('\n').find((l) => l && !l.startsWith('#'));
  if (!first) return 0;
  const media = await fetch(new URL(first, hlsUrl));
  return media.status === 200 ? [...(await media.text()).matchAll(/#EXTINF:/g)].length : 0;
}

const stream = async (id: string) => (await api(t.http, t.secretKey, 'GET', `/v2/streams/${id}`)).json;

/** Publishes the tone over WHIP and checks HLS and /listen carry it at 660 Hz; then DELETE → idle. */
async function publishAndHear(codec: 'opus' | 'aac') {
  const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: `WHIP ${codec}`, codec, reconnectWindow: 0 })).json;
  expect(s.whipUrl).toBe(`${t.http}/whip/${s.id}`);
  const c: WhipClient = await whipConnect(s.whipUrl, s.streamKey);
  try {
    expect(c.status).toBe(201);
    expect(c.location).toMatch(new RegExp(`^/whip/${s.id}/\\w+$`));
    expect(c.headers.get('etag')).toMatch(/^"\w+"$/);
    expect(c.headers.get('content-type')).toBe('application/sdp');
    expect(c.body).toMatch(/a=rtpmap:111 opus\/48000\/2/i);
    const sending = c.send(tone);
    await waitFor(async () => (await stream(s.id)).status === 'live', 10_000, 100, 'live');
    // Once the passthrough layer lists three segments, decode from its start.
    await waitFor(async () => (await segmentCount(s.hlsUrl)) >= 3, 20_000, 250, 'three segments');
    const hls = await decodedFrequency(s.hlsUrl, 3, ['-live_start_index', '0']);
    expect(hls.hz).toBeGreaterThan(650);
    expect(hls.hz).toBeLessThan(670);
    expect(hls.rms).toBeGreaterThan(0.05);
    const listen = await decodedFrequency(s.listenUrl, 2);
    expect(listen.hz).toBeGreaterThan(650);
    expect(listen.hz).toBeLessThan(670);
    if (codec === 'opus') {
      // A WHEP listener gets the very Opus packets the WHIP publisher sends (passthrough).
      const sent = new Set(tone.map((p) => p.toString('base64')));
      let same = 0;
      const whep = await whepListener(t.http, s.id, (p) => void (sent.has(p.toString('base64')) && same++));
      await waitFor(() => same >= 50, 10_000, 100, 'the publisher\'s Opus packets over WHEP');
      await whep.close();
    }
    await sending;
    const del = await fetch(new URL(c.location!, t.http), { method: 'DELETE' });
    expect(del.status).toBe(200);
    await waitFor(async () => (await stream(s.id)).status === 'idle', 10_000, 100, 'idle after DELETE');
  } finally {
    await c.close();
  }
}

describe('WHIP publish', () => {
  it('an opus stream passes the Opus through: the tone is heard on HLS and /listen; DELETE → idle', async () => {
    await publishAndHear('opus');
  }, 60_000);

  it('an aac stream gets its top layer encoded from the Opus: the tone is heard', async () => {
    await publishAndHear('aac');
  }, 60_000);
});

describe('WHIP refusals and HTTP', () => {
  const offer = (extra = '') => `v=0\r\no=- 0 0 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 0 9\r\na=rtpmap:0 PCMU/8000\r\na=rtpmap:9 G722/8000\r\n${extra}`;

  it('refuses no key, a wrong key, an unknown stream, no Opus, a wrong type and an offer too large', async () => {
    const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Refusals', codec: 'opus' })).json;
    const post = (id: string, bearer: string | null, body: string, type = 'application/sdp') =>
      fetch(`${t.http}/whip/${id}`, { method: 'POST', headers: { 'Content-Type': type, ...(bearer ? { Authorization: `Bearer ${bearer}` } : {}) }, body });
    const none = await post(s.id, null, offer());
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toMatch(/^Bearer/);
    expect(none.headers.get('access-control-allow-origin')).toBe('*');
    expect((await post(s.id, 'sk_wrong_key', offer())).status).toBe(401);
    expect((await post('stm_unknown1', s.streamKey, offer())).status).toBe(404);
    const noOpus = await post(s.id, s.streamKey, offer());
    expect(noOpus.status).toBe(406);
    const err = ((await noOpus.json()) as any).error;
    expect(err.code).toBe('codec_not_acceptable');
    expect(err.message).toMatch(/PCMU, G722/);
    const videoOnly = await post(s.id, s.streamKey, 'v=0\r\no=- 0 0 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\nm=video 9 UDP/TLS/RTP/SAVPF 96\r\na=rtpmap:96 H264/90000\r\n');
    expect(videoOnly.status).toBe(406);
    expect(((await videoOnly.json()) as any).error.message).toMatch(/no audio; video only/);
    expect((await post(s.id, s.streamKey, 'hello')).status).toBe(400);
    expect((await post(s.id, s.streamKey, offer(), 'application/json')).status).toBe(415);
    expect((await post(s.id, s.streamKey, offer('a=x-pad:' + 'x'.repeat(70_000) + '\r\n'))).status).toBe(413);
    expect((await stream(s.id)).status).toBe('idle');
  });

  it('answers a video section rejected (port 0, out of the BUNDLE group) and still takes the audio', async () => {
    const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Video', codec: 'opus', reconnectWindow: 0 })).json;
    // werift as a client cannot apply an answer that rejects a section (browsers and OBS do): checked as text.
    const c = await whipConnect(s.whipUrl, s.streamKey, { video: true, apply: false });
    try {
      expect(c.status).toBe(201);
      const m = c.body.split('\r\n').filter((l) => l.startsWith('m='));
      expect(m).toHaveLength(2);
      expect(m[0]).toMatch(/^m=audio [1-9]\d* /);
      expect(m[1]).toMatch(/^m=video 0 /);
      const mids = c.body.split('\r\n').filter((l) => l.startsWith('a=mid:'));
      expect(mids).toHaveLength(2);
      const bundle = c.body.split('\r\n').find((l) => l.startsWith('a=group:BUNDLE'));
      expect(bundle?.split(' ')).toEqual(['a=group:BUNDLE', mids[0]!.slice(6)]);
    } finally {
      await fetch(new URL(c.location!, t.http), { method: 'DELETE' });
      await c.close();
    }
  });

  it('answers the CORS preflight and refuses trickle PATCH with 405', async () => {
    const pre = await fetch(`${t.http}/whip/stm_any`, { method: 'OPTIONS', headers: { Origin: 'https://studio.example', 'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': 'authorization, content-type' } });
    expect(pre.status).toBe(204);
    expect(pre.headers.get('access-control-allow-origin')).toBe('*');
    expect(pre.headers.get('access-control-allow-headers')).toMatch(/Authorization/);
    expect(pre.headers.get('access-control-allow-headers')).toMatch(/Content-Type/);
    expect(pre.headers.get('access-control-expose-headers')).toMatch(/Location/);
    expect(pre.headers.get('access-control-expose-headers')).toMatch(/ETag/);
    const patch = await fetch(`${t.http}/whip/stm_any/sess`, { method: 'PATCH', headers: { 'Content-Type': 'application/trickle-ice-sdpfrag' }, body: 'a=end-of-candidates\r\n' });
    expect(patch.status).toBe(405);
    expect(patch.headers.get('allow')).toMatch(/DELETE/);
  });
});

describe('publish tokens', () => {
  it('mints a token for one stream: it publishes there; another stream → 403; garbage → 401', async () => {
    const a = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Token A', codec: 'opus', reconnectWindow: 0 })).json;
    const b = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Token B', codec: 'opus' })).json;
    const minted = await api(t.http, t.secretKey, 'POST', `/v2/streams/${a.id}/publish_tokens`, {});
    expect(minted.status).toBe(201);
    expect(minted.json.object).toBe('publish_token');
    const left = (Date.parse(minted.json.expiresAt) - Date.now()) / 1000;
    expect(left).toBeGreaterThan(590);
    expect(left).toBeLessThanOrEqual(600);
    const long = await api(t.http, t.secretKey, 'POST', `/v2/streams/${a.id}/publish_tokens`, { ttlSeconds: 86_400 });
    expect(long.status).toBe(201);
    expect((await api(t.http, t.secretKey, 'POST', `/v2/streams/${a.id}/publish_tokens`, { ttlSeconds: 86_401 })).status).toBe(400);
    expect((await api(t.http, t.secretKey, 'POST', `/v2/streams/${a.id}/publish_tokens`, { ttlSeconds: 10 })).status).toBe(400);
    expect((await api(t.http, t.publishableKey, 'POST', `/v2/streams/${a.id}/publish_tokens`, {})).status).toBe(403);
    expect((await api(t.http, t.secretKey, 'POST', `/v2/streams/stm_nope123/publish_tokens`, {})).status).toBe(404);

    const other = await fetch(b.whipUrl, { method: 'POST', headers: { 'Content-Type': 'application/sdp', Authorization: `Bearer ${minted.json.token}` }, body: 'v=0\r\n' });
    expect(other.status).toBe(403);
    const bad = await fetch(a.whipUrl, { method: 'POST', headers: { 'Content-Type': 'application/sdp', Authorization: 'Bearer aaa.bbb.ccc' }, body: 'v=0\r\n' });
    expect(bad.status).toBe(401);

    const c = await whipConnect(a.whipUrl, minted.json.token);
    try {
      expect(c.status).toBe(201);
      const sending = c.send(tone.slice(0, 150));
      await waitFor(async () => (await stream(a.id)).status === 'live', 10_000, 100, 'live with a publish token');
      await sending;
    } finally {
      await fetch(new URL(c.location!, t.http), { method: 'DELETE' });
      await c.close();
    }
  }, 30_000);
});
