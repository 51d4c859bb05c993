/**
 * Listener tracking over real HLS (docs/behaviour.md §4): a real FFmpeg publishes AAC, simulated players
 * (fetch) enter through the multivariant playlist behind a trusted proxy (X-Forwarded-For with fixed
 * public addresses), get a session id carried into every URI, are counted once across re-fetches,
 * show up in /listeners (paginated), /stats (countries, peak, average duration, totals) and the
 * stream's listenerCount, leave after 3 target durations without a request (listener.left), and the
 * totals survive a restart.
 */
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { rmSync } from 'node:fs';
import { loadConfig } from '../../../src/base/config.js';
import { createLogger } from '../../../src/base/logger.js';
import { startServer } from '../../../src/main.js';
import { api, startInProcess, waitFor, type TestServer } from '../../helpers/server.js';
import { exited, publish } from '../../helpers/publish.js';

let t: TestServer;
beforeAll(async () => {
  t = await startInProcess({ SKYLARK_TRUSTED_PROXIES: '127.0.0.1/32' });
});
afterAll(async () => {
  await t?.close();
});

/** A simulated HLS player: multivariant once, then the media playlist and its newest segment on `poll()`. */
async function player(hlsUrl: string, headers: Record<string, string>) {
  const mv = await fetch(hlsUrl, { headers });
  expect(mv.status).toBe(200);
  const variant = (await mv.text()).split('\n').find((l) => l && !l.startsWith('#'))!;
  const mediaUrl = new URL(variant, hlsUrl).toString();
  const poll = async () => {
    // The newest media URI: a segment, or (LL-HLS, before the first full segment) a part.
    let text = '';
    let segs: string[] = [];
    for (let i = 0; i < 50 && segs.length === 0; i++) {
      const r = await fetch(mediaUrl, { headers });
      expect(r.status).toBe(200);
      text = await r.text();
      segs = text.split('\n').filter((l) => /^\d+\.(ts|m4s)/.test(l));
      if (segs.length === 0) segs = [...text.matchAll(/#EXT-X-PART:[^\n]*URI="([^"]+)"/g)].map((m) => m[1]!);
      if (segs.length === 0) await new Promise((r) => setTimeout(r, 100));
    }
    const seg = await fetch(new URL(segs[segs.length - 1]!, mediaUrl), { headers });
    expect(seg.status).toBe(200);
    await seg.arrayBuffer();
    return { text, segs };
  };
  return { variant, mediaUrl, poll };
}

const events = (streamId: string) =>
  (t.server.db.prepare("SELECT type, data FROM events WHERE type LIKE 'listener.%' ORDER BY seq").all() as Array<{ type: string; data: string }>)
    .map((e) => ({ type: e.type, object: JSON.parse(e.data).object }))
    .filter((e) => e.object.streamId === streamId);

describe('listeners', () => {
  it('tracks HLS sessions with countries, lists them, reports stats, and records joined/left', async () => {
    const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Counted', reconnectWindow: 2, latencyMode: 'low' })).json;
    const pub = publish(`${s.rtmpUrl}/${s.streamKey}`, { seconds: 40 });
    try {
      await waitFor(async () => (await fetch(s.hlsUrl)).status === 200, 20_000, 200, 'HLS');

      const us = await player(s.hlsUrl, { 'X-Forwarded-For': '8.8.8.8', 'User-Agent': 'TestPlayer/1.0 (US)' });
      expect(us.variant).toMatch(/^a128\/index\.m3u8\?sid=[A-Za-z0-9_-]{24}$/);
      const first = await us.poll();
      // docs/behaviour.md §12: media objects carry no per-listener query (the same URI for every listener);
      // the session id travels on the media playlist's URI only.
      for (const l of first.segs) expect(l).toMatch(/^\d+(\.\d+)?\.(ts|m4s)$/);
      await us.poll(); // re-fetch: same session
      const de = await player(s.hlsUrl, { 'X-Forwarded-For': '2a00:1450:4001:80b::200e', 'User-Agent': 'TestPlayer/1.0 (DE)' });
      await de.poll();
      const local = await player(s.hlsUrl, { 'User-Agent': 'TestPlayer/1.0 (local)' });
      await local.poll();
      // An invented session id is served but not counted.
      const forged = await fetch(us.mediaUrl.replace(/sid=[^&]+/, 'sid=AAAAAAAAAAAAAAAAAAAAAAAA'));
      expect(forged.status).toBe(200);

      await waitFor(() => events(s.id).filter((e) => e.type === 'listener.joined').length === 3, 5000, 50, 'three joined events');
      const joined = events(s.id).filter((e) => e.type === 'listener.joined').map((e) => e.object);
      expect(joined.map((o) => o.country)).toEqual(['US', 'DE', null]);
      for (const o of joined) {
        expect(o).toMatchObject({ object: 'listener', streamId: s.id, protocol: 'hls' });
        expect(o.id).toMatch(/^lst_/);
        expect(JSON.stringify(o)).not.toMatch(/8\.8\.8\.8|2a00|127\.0\.0\.1/);
      }
      expect(joined[0].userAgent).toBe('TestPlayer/1.0 (US)');

      // The live count on the stream object, for secret and publishable keys.
      expect((await api(t.http, t.secretKey, 'GET', `/v2/streams/${s.id}`)).json.listenerCount).toBe(3);
      expect((await api(t.http, t.publishableKey, 'GET', `/v2/streams/${s.id}`)).json.listenerCount).toBe(3);

      // List: newest first, paginated.
      const all = await api(t.http, t.publishableKey, 'GET', `/v2/streams/${s.id}/listeners`);
      expect(all.status).toBe(200);
      expect(all.json).toMatchObject({ object: 'list', url: `/v2/streams/${s.id}/listeners`, hasMore: false, nextCursor: null });
      expect(all.json.data.map((l: any) => l.country)).toEqual([null, 'DE', 'US']);
      for (const l of all.json.data) {
        expect(Object.keys(l).sort()).toEqual(['connectedAt', 'country', 'durationSeconds', 'id', 'lastSeenAt', 'mode', 'object', 'protocol', 'streamId', 'userAgent']);
      }
      const p1 = (await api(t.http, t.secretKey, 'GET', `/v2/streams/${s.id}/listeners?limit=2`)).json;
      expect(p1.data.map((l: any) => l.id)).toEqual(all.json.data.slice(0, 2).map((l: any) => l.id));
      expect(p1.hasMore).toBe(true);
      expect(p1.nextCursor).toBe(p1.data[1].id);
      const p2 = (await api(t.http, t.secretKey, 'GET', `/v2/streams/${s.id}/listeners?limit=2&after=${p1.nextCursor}`)).json;
      expect(p2.data.map((l: any) => l.id)).toEqual([all.json.data[2].id]);
      expect(p2.hasMore).toBe(false);
      const back = (await api(t.http, t.secretKey, 'GET', `/v2/streams/${s.id}/listeners?limit=1&before=${all.json.data[2].id}`)).json;
      expect(back.data.map((l: any) => l.id)).toEqual([all.json.data[1].id]);
      expect(back.hasMore).toBe(true);
      expect(back.nextCursor).toBe(all.json.data[1].id);
      const badCursor = await api(t.http, t.secretKey, 'GET', `/v2/streams/${s.id}/listeners?after=lst_nope`);
      expect(badCursor.status).toBe(400);
      expect(badCursor.json.error.param).toBe('after');
      expect((await api(t.http, t.secretKey, 'GET', `/v2/streams/stm_nope/listeners`)).status).toBe(404);

      // Stats.
      const stats = await api(t.http, t.publishableKey, 'GET', `/v2/streams/${s.id}/stats`);
      expect(stats.status).toBe(200);
      expect(stats.json).toMatchObject({ object: 'stream_stats', listenerCount: 3, peakListenerCount: 3, totalListeners: 3 });
      expect(stats.json.countries).toEqual(expect.arrayContaining([{ country: 'US', listeners: 1 }, { country: 'DE', listeners: 1 }, { country: null, listeners: 1 }]));
      expect(stats.json.countries).toHaveLength(3);
      expect(typeof stats.json.averageListenDurationSeconds).toBe('number');

      // The deprecated alias.
      const vc = await api(t.http, t.secretKey, 'GET', `/v2/streams/${s.id}/viewer_count`);
      expect(vc.status).toBe(200);
      expect(vc.json).toMatchObject({ object: 'stream_stats', listenerCount: 3 });
      expect(vc.headers.get('deprecation')).toMatch(/^@\d+$/);
      expect(vc.headers.get('sunset')).toMatch(/GMT$/);
      expect(vc.headers.get('link')).toBe(`<${t.server.urls.baseUrl}/streams/${s.id}/stats>; rel="successor-version"`);

      // US and DE keep playing; the local one stops and leaves after 3 target durations (6 s).
      let playing = true;
      const keepAlive = (async () => {
        while (playing) {
          await Promise.all([us.poll(), de.poll()]);
          await new Promise((r) => setTimeout(r, 1000));
        }
      })();
      await waitFor(() => events(s.id).some((e) => e.type === 'listener.left'), 20_000, 200, 'listener.left');
      const left = events(s.id).filter((e) => e.type === 'listener.left');
      expect(left).toHaveLength(1);
      expect(left[0]!.object.country).toBeNull();
      expect(left[0]!.object.id).toBe(joined[2].id);
      const after = (await api(t.http, t.secretKey, 'GET', `/v2/streams/${s.id}/stats`)).json;
      expect(after).toMatchObject({ listenerCount: 2, peakListenerCount: 3, totalListeners: 3 });
      expect(after.countries).toEqual(expect.arrayContaining([{ country: 'US', listeners: 1 }, { country: 'DE', listeners: 1 }]));
      expect(after.averageListenDurationSeconds).toBeGreaterThan(0);
      playing = false;
      await keepAlive;
    } finally {
      pub.kill('SIGKILL');
      await exited(pub);
    }
  });

  it('mints listener tokens for secret and publishable keys', async () => {
    const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Tokens', latencyMode: 'low' })).json;
    for (const key of [t.secretKey, t.publishableKey]) {
      const r = await api(t.http, key, 'POST', `/v2/streams/${s.id}/listener_tokens`);
      expect(r.status).toBe(201);
      expect(r.json).toMatchObject({ object: 'listener_token', streamId: s.id });
      expect(r.json.token.split('.')).toHaveLength(3);
      const hours = (Date.parse(r.json.expiresAt) - Date.now()) / 3600_000;
      expect(hours).toBeGreaterThan(23.9);
      expect(hours).toBeLessThanOrEqual(24);
    }
    expect((await api(t.http, t.secretKey, 'POST', `/v2/streams/${s.id}/listener_tokens`, { nope: 1 })).status).toBe(400);
    expect((await api(t.http, t.secretKey, 'POST', `/v2/streams/stm_unknown/listener_tokens`)).status).toBe(404);
    expect((await api(t.http, null, 'POST', `/v2/streams/${s.id}/listener_tokens`)).status).toBe(401);
  });
});

describe('listener totals survive a restart', () => {
  it('keeps peak, total and average duration, and closes sessions left open', async () => {
    const t2 = await startInProcess({ SKYLARK_TRUSTED_PROXIES: '127.0.0.1/32' });
    let closed = false;
    onTestFinished(async () => {
      if (!closed) await t2.close();
    });
    const s = (await api(t2.http, t2.secretKey, 'POST', '/v2/streams', { title: 'Durable', reconnectWindow: 1, latencyMode: 'low' })).json;
    const pub = publish(`${s.rtmpUrl}/${s.streamKey}`, { seconds: 12 });
    try {
      await waitFor(async () => (await fetch(s.hlsUrl)).status === 200, 20_000, 200, 'HLS');
      const a = await player(s.hlsUrl, { 'X-Forwarded-For': '8.8.8.8' });
      await a.poll();
      await new Promise((r) => setTimeout(r, 1500)); // A fixed wait on purpose: a player polls again 1.5 s later
      await a.poll();
      await waitFor(async () => (await api(t2.http, t2.secretKey, 'GET', `/v2/streams/${s.id}/stats`)).json.totalListeners === 1, 5000, 100, 'joined');
    } finally {
      pub.kill('SIGKILL');
      await exited(pub);
    }
    // Restart on the same data dir while the session is still open.
    await t2.server.close();
    const config = loadConfig({ SKYLARK_HTTP_PORT: '0', SKYLARK_RTMP_PORT: '0', SKYLARK_ICECAST_PORT: '0', SKYLARK_DATA_DIR: t2.dataDir, SKYLARK_LOG_LEVEL: 'error' });
    const restarted = await startServer(config, createLogger('error'));
    onTestFinished(async () => {
      await restarted.close();
      closed = true;
      rmSync(t2.dataDir, { recursive: true, force: true });
    });
    const http = `http://127.0.0.1:${restarted.httpPort}`;
    const stats = (await api(http, t2.secretKey, 'GET', `/v2/streams/${s.id}/stats`)).json;
    expect(stats).toMatchObject({ object: 'stream_stats', listenerCount: 0, peakListenerCount: 1, totalListeners: 1 });
    expect(stats.averageListenDurationSeconds).toBeGreaterThan(0);
    const left = (restarted.db.prepare("SELECT data FROM events WHERE type = 'listener.left'").all() as Array<{ data: string }>)
      .map((e) => JSON.parse(e.data).object)
      .filter((o) => o.streamId === s.id);
    expect(left).toHaveLength(1);
    expect(left[0].country).toBe('US');
  });
});
