/**
 * Latency is a per-stream choice (docs/behaviour.md §3, issue "Real players, real cost" item 2, as Mux's
 * `latency_mode`): `standard` (classic HLS, the default for new streams) or `low` (LL-HLS parts,
 * blocking reload, preload hints), set on create and PATCH, in every answer and the OpenAPI
 * document (every answer here is checked against it). A real FFmpeg publisher per stream.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChildProcess } from 'node:child_process';
import { api, startInProcess, waitFor, type TestServer } from '../../helpers/server.js';
import { exited, publish } from '../../helpers/publish.js';

describe('latencyMode', () => {
  let t: TestServer;
  const pubs: ChildProcess[] = [];
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

  it('defaults to standard, takes low, changes by PATCH, refuses anything else', async () => {
    const std = await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Standard' });
    expect(std.status).toBe(201);
    expect(std.json.latencyMode).toBe('standard');
    const low = await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Low', latencyMode: 'low' });
    expect(low.json.latencyMode).toBe('low');
    const patched = await api(t.http, t.secretKey, 'PATCH', `/v2/streams/${std.json.id}`, { latencyMode: 'low' });
    expect(patched.status).toBe(200);
    expect(patched.json.latencyMode).toBe('low');
    expect((await api(t.http, t.secretKey, 'GET', `/v2/streams/${std.json.id}`)).json.latencyMode).toBe('low');
    for (const bad of ['ultra', '', 1, null]) {
      const r = await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Bad', latencyMode: bad });
      expect(r.status).toBe(400);
      expect(r.json.error).toMatchObject({ code: 'parameter_invalid', param: 'latencyMode' });
    }
    const doc = (await api(t.http, null, 'GET', '/v2/openapi.json')).json;
    expect(JSON.stringify(doc.paths)).toContain('latencyMode');
  });

  it('standard serves classic HLS: no parts, no blocking reload; low serves LL-HLS', async () => {
    const make = async (latencyMode: 'standard' | 'low') => {
      const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: latencyMode, latencyMode, reconnectWindow: 0 })).json;
      pubs.push(publish(`${s.rtmpUrl}/${s.streamKey}`, { seconds: 30 }));
      const media = new URL('a128/index.m3u8', s.hlsUrl).href;
      const text = await waitFor(async () => {
        const r = await fetch(media);
        const body = r.status === 200 ? await r.text() : '';
        return body.includes('#EXTINF') ? { body, cache: r.headers.get('cache-control') } : null;
      }, 20_000, 200, `${latencyMode} playlist`);
      return { s, media, ...text };
    };
    const [std, low] = await Promise.all([make('standard'), make('low')]);

    expect(std.body).not.toContain('#EXT-X-PART');
    expect(std.body).not.toContain('CAN-BLOCK-RELOAD');
    expect(std.body).not.toContain('#EXT-X-PRELOAD-HINT');
    expect(std.cache).toBe('public, max-age=1');
    const blocked = await fetch(`${std.media}?_HLS_msn=100`);
    expect(blocked.status).toBe(400);

    expect(low.body).toMatch(/#EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES/);
    expect(low.body).toMatch(/#EXT-X-PART-INF:PART-TARGET=/);
    expect(low.body).toMatch(/#EXT-X-PRELOAD-HINT:TYPE=PART/);
    expect(low.cache).toBe('no-cache');
  }, 60_000);
});
