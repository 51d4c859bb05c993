/**
 * HTTP on two threads (`SKYLARK_HTTP_THREADS=2`, docs/scaling.md): the kernel spreads connections
 * over the main thread's and the worker's listen sockets, so every request here is made on a
 * fresh connection and the per-thread counts (`RunningServer.threadCounts`) show where it landed.
 * - HLS (multivariant, media playlist, a blocking reload, parts, segments) and progressive
 *   listening are answered by the worker itself, from its mirror; the sessions it sees reach the
 *   registry (one HLS session per sid, with its country; an Icecast-style listener joins and leaves).
 * - Requests the worker forwards to the main thread carry the client's address: the per-IP OAuth
 *   rate limit counts one client across both threads, keys on `X-Forwarded-For` from a trusted
 *   proxy, and a client cannot claim another address with the forwarding header.
 * - An episode upload (a streamed body of tens of MB), its download, and a WHEP session go through
 *   the worker.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import http from 'node:http';
import { createHash } from 'node:crypto';
import { execFileSync, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { RTCPeerConnection } from 'werift';
import { api, startInProcess, waitFor, type TestServer } from '../../helpers/server.js';
import { exited, publish } from '../../helpers/publish.js';
import { ffmpegPath } from '../../helpers/ffmpeg.js';

let t: TestServer;
const publishers: ChildProcess[] = [];

beforeAll(async () => {
  t = await startInProcess({ SKYLARK_HTTP_THREADS: '2', SKYLARK_TRUSTED_PROXIES: '127.0.0.1/32' });
});
afterAll(async () => {
  for (const p of publishers) p.kill('SIGKILL');
  await Promise.all(publishers.map(exited));
  await t?.close();
});

interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

/** One request on a new connection (so the kernel picks a thread for it). */
function fresh(method: string, url: string, headers: Record<string, string> = {}, body?: Buffer | ((req: http.ClientRequest) => void)): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const req = http.request({ host: u.hostname, port: u.port, method, path: u.pathname + u.search, headers: { Connection: 'close', ...headers }, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    if (typeof body === 'function') body(req);
    else req.end(body);
  });
}

/** What thread 1 (the worker) counted so far. */
const worker = async () => (await t.server.threadCounts()).get(1)!;
const main = async () => (await t.server.threadCounts()).get(0)!;

/** Repeats `fn` on fresh connections until the worker forwarded one more request (each lands on either thread). */
async function throughWorker<T>(fn: () => Promise<T>): Promise<T> {
  for (let i = 0; i < 40; i++) {
    const before = (await worker()).forwarded;
    const r = await fn();
    if ((await worker()).forwarded > before) return r;
  }
  throw new Error('no request landed on the worker thread in 40 tries');
}

describe('two HTTP threads', () => {
  it('starts a worker that listens on the same port', async () => {
    expect(t.server.httpThreads).toBe(2);
    expect([...(await t.server.threadCounts()).keys()]).toEqual([0, 1]);
  });

  it('serves HLS from the worker thread, and its sessions reach the registry', async () => {
    const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Threads', reconnectWindow: 2, latencyMode: 'low' })).json;
    publishers.push(publish(`${s.rtmpUrl}/${s.streamKey}`, { seconds: 60 }));
    await waitFor(async () => (await fetch(s.hlsUrl)).status === 200, 20_000, 200, 'HLS');
    const w0 = await worker();
    const m0 = await main();
    // One listener (a sid from the multivariant playlist), from a public address behind the trusted proxy.
    const xff = { 'X-Forwarded-For': '8.8.8.8', 'User-Agent': 'ThreadedPlayer/1.0' };
    const mv = await fresh('GET', s.hlsUrl, xff);
    expect(mv.status).toBe(200);
    const variant = mv.body.toString().split('\n').find((l) => l.endsWith('.m3u8') || l.includes('.m3u8?'))!;
    expect(variant).toMatch(/^a\d+\/index\.m3u8\?sid=[A-Za-z0-9_-]{24}$/);
    const mediaUrl = new URL(variant, s.hlsUrl).href;
    let playlist = '';
    for (let i = 0; i < 16; i++) {
      const r = await fresh('GET', mediaUrl, xff);
      expect(r.status).toBe(200);
      playlist = r.body.toString();
    }
    // Parts and segments, each on a fresh connection; the bytes are the same from either thread.
    const part = playlist.split('\n').filter((l) => l.startsWith('#EXT-X-PART:')).pop()!;
    const partUri = /URI="([^"]+)"/.exec(part)![1]!;
    const partUrl = new URL(partUri, mediaUrl).href;
    const bodies = new Set<string>();
    for (let i = 0; i < 8; i++) {
      const r = await fresh('GET', partUrl);
      expect(r.status).toBe(200);
      bodies.add(createHash('sha256').update(r.body).digest('hex'));
    }
    expect(bodies.size).toBe(1);
    const w1 = await worker();
    const m1 = await main();
    // 1 + 16 + 8 requests on fresh connections: both threads answered some (2^-24 odds otherwise).
    expect(w1.hls - w0.hls).toBeGreaterThan(0);
    expect(m1.hls - m0.hls).toBeGreaterThan(0);
    expect(w1.hls - w0.hls + (m1.hls - m0.hls)).toBe(25);

    // Blocking reloads for the next part and the next segment, on whichever thread: each answered
    // once what it names exists, listing it.
    const msn = Number(/#EXT-X-MEDIA-SEQUENCE:(\d+)/.exec(playlist)![1]) + (playlist.match(/#EXTINF/g) ?? []).length;
    const parts = playlist.split('\n').filter((l) => l.startsWith('#EXT-X-PART:') && l.includes(`URI="${msn}.`)).length;
    const lists = (text: string, m: number, p: number) => text.includes(`${m}.${p}.m4s`) || text.includes(`\n${m}.m4s`);
    const next = await fresh('GET', `${mediaUrl}&_HLS_msn=${msn}&_HLS_part=${parts}`);
    expect(next.status).toBe(200);
    expect(lists(next.body.toString(), msn, parts)).toBe(true);
    const seg = await fresh('GET', `${mediaUrl}&_HLS_msn=${msn + 1}`);
    expect(seg.status).toBe(200);
    expect(seg.body.toString()).toContain(`\n${msn}.m4s`);

    // One session, counted once whichever thread saw its requests, with the country of its address.
    await waitFor(async () => (await api(t.http, t.secretKey, 'GET', `/v2/streams/${s.id}/listeners`)).json.data.length === 1, 5000, 100, 'one listener');
    await new Promise((r) => setTimeout(r, 600)); // a worker batch (250 ms) more: still one
    const list = (await api(t.http, t.secretKey, 'GET', `/v2/streams/${s.id}/listeners`)).json.data;
    expect(list).toHaveLength(1);
    expect(list[0]).toMatchObject({ protocol: 'hls', country: 'US', userAgent: 'ThreadedPlayer/1.0' });
  });

  it('serves progressive listening from the worker thread; its listener joins and leaves', async () => {
    const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Radio', codec: 'mp3', quality: 'medium', reconnectWindow: 2 })).json;
    publishers.push(publish(`${s.rtmpUrl}/${s.streamKey}`, { seconds: 60, codecArgs: ['-ac', '2', '-ar', '44100', '-c:a', 'libmp3lame', '-b:a', '128k'] }));
    const listen = `${t.http}/listen/${s.id}.mp3`;
    await waitFor(async () => (await fetch(listen, { method: 'HEAD' })).status === 200, 30_000, 200, 'listening');
    // Listeners on fresh connections until one is on the worker: it gets the burst (≥ 2 s of 128 kbps).
    for (let i = 0; i < 40; i++) {
      const before = (await worker()).listen;
      const got = await new Promise<{ bytes: number; res: http.IncomingMessage; req: http.ClientRequest }>((resolve, reject) => {
        const u = new URL(listen);
        const req = http.get({ host: u.hostname, port: u.port, path: u.pathname, headers: { 'X-Forwarded-For': '81.2.69.160', 'User-Agent': 'RadioApp/2' }, agent: false }, (res) => {
          let bytes = 0;
          res.on('data', (c: Buffer) => {
            bytes += c.length;
            if (bytes >= 32_000) {
              res.removeAllListeners('data');
              resolve({ bytes, res, req });
            }
          });
          res.on('error', reject);
        });
        req.on('error', reject);
      });
      expect(got.res.statusCode).toBe(200);
      expect(got.res.headers['icy-name']).toBe('Radio');
      const onWorker = (await worker()).listen > before;
      if (onWorker) {
        await waitFor(async () => (await api(t.http, t.secretKey, 'GET', `/v2/streams/${s.id}/listeners`)).json.data.some((l: any) => l.protocol === 'icecast' && l.country === 'GB'), 5000, 100, 'icecast listener');
        got.req.destroy();
        await waitFor(async () => (await api(t.http, t.secretKey, 'GET', `/v2/streams/${s.id}/listeners`)).json.data.length === 0, 5000, 100, 'listener left');
        return;
      }
      got.req.destroy();
    }
    throw new Error('no listener landed on the worker thread in 40 tries');
  });

  it('forwards API requests with the client address: per-IP OAuth limits count one client across threads', async () => {
    const limits = t.server.guard.limits;
    const saved = limits.oauthPerIp;
    limits.oauthPerIp = 3;
    try {
      const token = (xff: string, extra: Record<string, string> = {}) =>
        fresh('POST', `${t.http}/oauth/token`, { 'Content-Type': 'application/x-www-form-urlencoded', 'X-Forwarded-For': xff, ...extra }, Buffer.from('grant_type=refresh_token&refresh_token=rt_x'));
      const f0 = (await worker()).forwarded;
      const seen: number[] = [];
      for (let i = 0; i < 10; i++) seen.push((await token('203.0.113.9')).status);
      expect((await worker()).forwarded).toBeGreaterThan(f0);
      expect(seen.slice(0, 3).every((s) => s !== 429)).toBe(true);
      expect(seen.slice(3)).toEqual(Array(7).fill(429));
      // Another client behind the same proxy has its own count.
      expect((await token('203.0.113.10')).status).not.toBe(429);
      // A client cannot pose as another address with the forwarding header (it counts as itself).
      const spoofed: number[] = [];
      for (let i = 0; i < 5; i++) spoofed.push((await token('198.51.100.7', { 'X-Skylark-Peer': `192.0.2.${i + 1}` })).status);
      expect(spoofed.slice(3)).toEqual([429, 429]);
    } finally {
      limits.oauthPerIp = saved;
    }
  });

  it('streams an episode upload and its download through the worker', async () => {
    const dir = t.dataDir;
    const file = path.join(dir, 'long.wav');
    // ~40 MB of WAV: many socket buffers each way.
    execFileSync(ffmpegPath(), ['-hide_banner', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', 'sine=frequency=440:duration=210', '-ac', '2', '-ar', '48000', '-c:a', 'pcm_s16le', file], { timeout: 60_000 });
    const wav = readFileSync(file);
    expect(wav.length).toBeGreaterThan(40_000_000);
    // Normalisation off: the bytes downloaded are the bytes uploaded (docs/podcasts.md "Loudness").
    const pid = (await api(t.http, t.secretKey, 'POST', '/v2/podcasts', { title: 'Threaded show', loudnessTarget: null })).json.id;
    const up = await throughWorker(async () => {
      const ep = (await api(t.http, t.secretKey, 'POST', `/v2/podcasts/${pid}/episodes`, { title: 'Long' })).json;
      // Chunked (no Content-Length), 256 KiB writes honouring the socket's backpressure.
      const r = await fresh('PUT', `${t.http}/v2/podcasts/${pid}/episodes/${ep.id}/audio`, { Authorization: `Bearer ${t.secretKey}`, 'Content-Type': 'audio/wav' }, (req) => {
        let o = 0;
        const pump = () => {
          while (o < wav.length) {
            const ok = req.write(wav.subarray(o, o + 262_144));
            o += 262_144;
            if (!ok) return void req.once('drain', pump);
          }
          req.end();
        };
        pump();
      });
      return { r, ep };
    });
    expect(up.r.status, up.r.body.toString()).toBe(200);
    const json = JSON.parse(up.r.body.toString());
    expect(json.audio).toMatchObject({ mimeType: 'audio/wav', sizeBytes: wav.length });
    expect((await api(t.http, t.secretKey, 'POST', `/v2/podcasts/${pid}/publish`, { episodeId: up.ep.id })).status).toBe(200);
    const digest = createHash('sha256').update(wav).digest('hex');
    const whole = await throughWorker(() => fresh('GET', json.audioUrl));
    expect(whole.status).toBe(200);
    expect(Number(whole.headers['content-length'])).toBe(wav.length);
    expect(createHash('sha256').update(whole.body).digest('hex')).toBe(digest);
    const range = await throughWorker(() => fresh('GET', json.audioUrl, { Range: 'bytes=1000-1999' }));
    expect(range.status).toBe(206);
    expect(range.headers['content-range']).toBe(`bytes 1000-1999/${wav.length}`);
    expect(range.body.equals(wav.subarray(1000, 2000))).toBe(true);
    const head = await throughWorker(() => fresh('HEAD', json.audioUrl));
    expect(head.status).toBe(200);
    expect(Number(head.headers['content-length'])).toBe(wav.length);
    expect(head.body.length).toBe(0);
  }, 120_000);

  it('answers a WHEP offer and its DELETE through the worker', async () => {
    const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Peers', reconnectWindow: 2 })).json;
    publishers.push(publish(`${s.rtmpUrl}/${s.streamKey}`, { seconds: 60 }));
    await waitFor(async () => (await api(t.http, t.secretKey, 'GET', `/v2/streams/${s.id}`)).json.status === 'live', 15_000, 100, 'live');
    const pc = new RTCPeerConnection({ iceUseIpv6: false });
    pc.addTransceiver('audio', { direction: 'recvonly' });
    await pc.setLocalDescription(await pc.createOffer());
    await waitFor(() => pc.iceGatheringState === 'complete', 5000, 20, 'client gathering');
    const offer = pc.localDescription!.sdp;
    await pc.close();
    // Each try a new session, answered on either thread, then deleted on either thread (on a fresh
    // connection each), until both an offer and a DELETE went through the worker.
    let offered = false;
    let deleted = false;
    for (let i = 0; i < 60 && !(offered && deleted); i++) {
      const f0 = (await worker()).forwarded;
      const o = await fresh('POST', `${t.http}/whep/${s.id}`, { 'Content-Type': 'application/sdp' }, Buffer.from(offer));
      expect(o.status, o.body.toString()).toBe(201);
      expect(o.headers['content-type']).toBe('application/sdp');
      expect(o.body.toString()).toMatch(/^v=0\r\n/);
      expect(o.headers.location).toMatch(new RegExp(`^/whep/${s.id}/`));
      const f1 = (await worker()).forwarded;
      if (f1 > f0) offered = true;
      const del = await fresh('DELETE', `${t.http}${o.headers.location}`);
      expect(del.status).toBe(200);
      if ((await worker()).forwarded > f1) deleted = true;
    }
    if (offered && deleted) return;
    throw new Error('no offer and DELETE landed on the worker thread in 60 tries');
  });

  it('replaces a worker that crashed; HLS is served on it again', async () => {
    const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Crash', reconnectWindow: 2 })).json;
    publishers.push(publish(`${s.rtmpUrl}/${s.streamKey}`, { seconds: 60 }));
    await waitFor(async () => (await fetch(s.hlsUrl)).status === 200, 20_000, 200, 'HLS');
    const before = await worker();
    expect(before.hls + before.forwarded).toBeGreaterThan(0);
    t.server.failHttpThread(1);
    // A new worker starts with fresh counts (and the state as it is now).
    await waitFor(async () => {
      const c = (await t.server.threadCounts()).get(1);
      return c !== undefined && c.hls + c.forwarded < before.hls + before.forwarded;
    }, 10_000, 100, 'a new worker');
    // Every request answers meanwhile and after (on the main thread while the worker is down).
    await waitFor(async () => {
      expect((await fresh('GET', s.hlsUrl)).status).toBe(200);
      return (await worker()).hls > 0;
    }, 10_000, 20, 'HLS on the new worker');
  });
});

