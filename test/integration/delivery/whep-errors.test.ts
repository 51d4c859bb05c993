/**
 * WHEP (RFC 9725) answers that need no browser: media type, unknown and idle streams, unknown
 * sessions, the methods it does not implement (PATCH → 405 with Allow), CORS preflights; and a
 * slow HLS reader that stops reading mid-segment does not hold up another listener.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import net from 'node:net';
import { api, startInProcess, waitFor, type TestServer } from '../../helpers/server.js';
import { exited, publish } from '../../helpers/publish.js';

let t: TestServer;
beforeAll(async () => {
  t = await startInProcess();
});
afterAll(async () => {
  await t?.close();
});

const offer = 'v=0\r\no=- 0 0 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\n';

describe('WHEP endpoint', () => {
  it('answers the cases around a session', async () => {
    const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Idle' })).json;
    const post = (id: string, body: string, type = 'application/sdp') => fetch(`${t.http}/whep/${id}`, { method: 'POST', headers: { 'Content-Type': type }, body });
    const wrongType = await post(s.id, offer, 'application/json');
    expect(wrongType.status).toBe(415);
    expect(wrongType.headers.get('access-control-allow-origin')).toBe('*');
    expect((await post('stm_unknown', offer)).status).toBe(404);
    const idle = await post(s.id, offer);
    expect(idle.status).toBe(409);
    expect(((await idle.json()) as any).error.code).toBe('stream_not_live');
    expect((await fetch(`${t.http}/whep/${s.id}/nope`, { method: 'DELETE' })).status).toBe(404);
    const patch = await fetch(`${t.http}/whep/${s.id}/nope`, { method: 'PATCH', headers: { 'Content-Type': 'application/trickle-ice-sdpfrag' }, body: 'a=end-of-candidates\r\n' });
    expect(patch.status).toBe(405);
    expect(patch.headers.get('allow')).toMatch(/DELETE/);
    const pre = await fetch(`${t.http}/whep/${s.id}/nope`, { method: 'OPTIONS' });
    expect(pre.status).toBe(204);
    expect(pre.headers.get('access-control-allow-methods')).toMatch(/DELETE/);
  });

  it('keeps serving HLS to others while a reader stalls mid-segment', async () => {
    const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Stall', reconnectWindow: 1 })).json;
    const pub = publish(`${s.rtmpUrl}/${s.streamKey}`, { seconds: 20 });
    try {
      await waitFor(async () => (await fetch(s.hlsUrl)).status === 200, 20_000, 200, 'HLS');
      const mediaUrl = s.hlsUrl.replace('index.m3u8', 'a128/index.m3u8');
      // A whole segment (LL-HLS playlists exist from the first part on).
      const seg = await waitFor(async () => (await (await fetch(mediaUrl)).text()).split('\n').find((l: string) => /^\d+\.(ts|m4s)$/.test(l)), 20_000, 200, 'a segment');
      const u = new URL(seg, mediaUrl);
      // 50 stalled readers pipelining segment requests and never reading.
      const stalled: net.Socket[] = [];
      for (let i = 0; i < 50; i++) {
        const sock = net.connect(Number(u.port), u.hostname);
        sock.pause();
        sock.on('error', () => {});
        sock.write(`GET ${u.pathname} HTTP/1.1\r\nHost: x\r\n\r\n`.repeat(20));
        stalled.push(sock);
      }
      // Others still get whole segments.
      for (let i = 0; i < 10; i++) {
        const r = await fetch(u, { signal: AbortSignal.timeout(5000) });
        expect(r.status).toBe(200);
        expect((await r.arrayBuffer()).byteLength).toBeGreaterThan(1000);
      }
      for (const sck of stalled) sck.destroy();
    } finally {
      pub.kill('SIGKILL');
      await exited(pub);
    }
  });
});
