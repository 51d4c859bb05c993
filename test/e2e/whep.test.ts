/**
 * WebRTC playback in a real browser: headless Chromium does a WHEP exchange (RFC 9725)
 * against Skylark while a real publisher sends audio, and `getStats()` shows audio packets arriving
 * (packetsReceived growing) with a non-zero audio level: an AAC stream (FFmpeg publisher, shared
 * AAC→Opus codec process), an MP3 stream (same, from MP3) and an Opus stream (E-RTMP publisher,
 * forwarded without re-encoding).
 * DELETE on the session URL ends the session and the listener leaves.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import path from 'node:path';
import { readFileSync, readdirSync } from 'node:fs';
import { api, startInProcess, tempDir, waitFor, type TestServer } from '../helpers/server.js';
import { exited, publish } from '../helpers/publish.js';
import { openPlayer, type TestBrowser } from '../helpers/browser.js';
import { makeOpusFile, publishOpus } from '../helpers/ertmp-publisher.js';

let t: TestServer;
let b: TestBrowser;
const tmp = tempDir('skylark-whep-');
beforeAll(async () => {
  t = await startInProcess();
  b = await openPlayer();
});
afterAll(async () => {
  await b?.close();
  await t?.close();
  tmp.cleanup();
});

/** This process's child FFmpeg codec processes (AAC→Opus) from /proc. */
function codecProcesses(): number {
  let n = 0;
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === process.pid && readFileSync(`/proc/${d}/cmdline`, 'utf8').includes('libopus')) n++;
    } catch {
      /* gone */
    }
  }
  return n;
}

type Inbound = { packetsReceived: number; audioLevel: number; totalAudioEnergy: number; state: string };
const inbound = () => b.page.evaluate(() => (globalThis as any).inbound()) as Promise<Inbound | null>;

/** WHEP from the page; asserts 201 with an SDP answer and a Location, then packets and level. */
async function playAndCheck(streamId: string, token?: string, expectCodecProcess = false) {
  expect(codecProcesses()).toBe(0); // started by the first WebRTC listener, not before
  const r = await b.page.evaluate(([url, tok]) => (globalThis as any).whep(url, tok), [`${t.http}/whep/${streamId}`, token ?? ''] as const);
  expect(r).toMatchObject({ status: 201, contentType: 'application/sdp' });
  expect(r.location).toMatch(new RegExp(`/whep/${streamId}/[A-Za-z0-9]+$`));
  expect(r.etag).toMatch(/^".+"$/);
  const first = await waitFor(async () => {
    const s = await inbound();
    return s && s.packetsReceived > 0 ? s : null;
  }, 20_000, 200, 'first audio packets');
  const later = await waitFor(async () => {
    const s = await inbound();
    return s && s.packetsReceived > first.packetsReceived + 25 && s.audioLevel > 0 ? s : null;
  }, 20_000, 200, 'growing packets with a non-zero audio level');
  expect(later.state).toBe('connected');
  expect(later.audioLevel).toBeGreaterThan(0);
  expect(later.totalAudioEnergy).toBeGreaterThan(0);
  expect(codecProcesses()).toBe(expectCodecProcess ? 1 : 0);
  // A WebRTC peer is a listener.
  await waitFor(async () => (await api(t.http, t.secretKey, 'GET', `/v2/streams/${streamId}`)).json.listenerCount === 1, 5000, 100, 'listener counted');
  const listeners = (await api(t.http, t.secretKey, 'GET', `/v2/streams/${streamId}/listeners`)).json.data;
  expect(listeners).toHaveLength(1);
  expect(listeners[0]).toMatchObject({ protocol: 'webrtc', streamId, country: null });
  expect(listeners[0].userAgent).toMatch(/Chrom/);
  // DELETE ends the session: the listener leaves.
  expect(await b.page.evaluate(() => (globalThis as any).hangUp())).toBe(200);
  await waitFor(async () => (await api(t.http, t.secretKey, 'GET', `/v2/streams/${streamId}`)).json.listenerCount === 0, 5000, 100, 'listener left');
  await waitFor(
    () => (t.server.db.prepare("SELECT COUNT(*) AS n FROM events WHERE type = 'listener.left' AND data LIKE ?").get(`%${streamId}%`) as { n: number }).n === 1,
    5000, 100, 'listener.left',
  );
  await waitFor(() => codecProcesses() === 0, 5000, 100, 'codec process stopped after the last listener');
}

describe('WHEP in Chromium', () => {
  it('plays an AAC stream through the shared AAC→Opus codec process', async () => {
    const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'AAC over WebRTC', reconnectWindow: 1 })).json;
    const pub = publish(`${s.rtmpUrl}/${s.streamKey}`, { seconds: 40 });
    try {
      await waitFor(async () => (await api(t.http, t.secretKey, 'GET', `/v2/streams/${s.id}`)).json.status === 'live', 15_000, 100, 'live');
      // CORS preflight as a browser sends it.
      const pre = await fetch(`${t.http}/whep/${s.id}`, { method: 'OPTIONS', headers: { Origin: b.pageUrl, 'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': 'authorization, content-type' } });
      expect(pre.status).toBe(204);
      expect(pre.headers.get('access-control-allow-origin')).toBe('*');
      expect(pre.headers.get('access-control-allow-methods')).toMatch(/POST/);
      expect(pre.headers.get('access-control-allow-headers')).toMatch(/Authorization/);
      expect(pre.headers.get('access-control-expose-headers')).toMatch(/Location/);
      await playAndCheck(s.id, undefined, true);
    } finally {
      pub.kill('SIGKILL');
      await exited(pub);
    }
  });

  it('plays an MP3 stream through the codec process', async () => {
    const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'MP3 over WebRTC', codec: 'mp3', reconnectWindow: 1 })).json;
    const pub = publish(`${s.rtmpUrl}/${s.streamKey}`, { seconds: 40, codecArgs: ['-ac', '2', '-ar', '44100', '-c:a', 'libmp3lame', '-b:a', '128k'] });
    try {
      await waitFor(async () => (await api(t.http, t.secretKey, 'GET', `/v2/streams/${s.id}`)).json.status === 'live', 15_000, 100, 'live');
      await playAndCheck(s.id, undefined, true);
    } finally {
      pub.kill('SIGKILL');
      await exited(pub);
    }
  });

  it('forwards an Opus stream without re-encoding', async () => {
    const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Opus over WebRTC', codec: 'opus', quality: 'low', playback: 'token', reconnectWindow: 1 })).json;
    const file = makeOpusFile(path.join(tmp.dir, 'sine.ogg'), 5);
    const pub = publishOpus(s.rtmpUrl, s.streamKey, file, 40);
    try {
      await waitFor(async () => (await api(t.http, t.secretKey, 'GET', `/v2/streams/${s.id}`)).json.status === 'live', 15_000, 100, 'live');
      const token = (await api(t.http, t.secretKey, 'POST', `/v2/streams/${s.id}/listener_tokens`)).json.token;
      await playAndCheck(s.id, token);
    } finally {
      pub.stop();
      await pub.done;
    }
  });
});
