/**
 * A WHIP publish is a publish (docs/behaviour.md "Go live over WHIP"): over a lossy link (5 % of
 * the RTP dropped, some packets reordered) the HLS segments keep their durations and the tone
 * still decodes; a WHIP publisher takes an RTMP publisher's stream over (the newest wins) and an
 * RTMP publisher takes it back; a publish that stops sending RTP is closed after 10 s.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, startInProcess, tempDir, waitFor, type TestServer } from '../../helpers/server.js';
import { exited, publish } from '../../helpers/publish.js';
import { decodedFrequency, toneOpusPackets, whipConnect } from '../../helpers/whip-client.js';

let t: TestServer;
const tmp = tempDir('skylark-whip-');
let tone: Buffer[];
beforeAll(async () => {
  t = await startInProcess();
  tone = toneOpusPackets(tmp.dir, 660, 16);
});
afterAll(async () => {
  await t?.close();
  tmp.cleanup();
});

const stream = async (id: string) => (await api(t.http, t.secretKey, 'GET', `/v2/streams/${id}`)).json;

/** The EXTINF durations (s) of the stream's first media playlist, and its target duration. */
async function segmentDurations(hlsUrl: string): Promise<{ target: number; durations: number[] }> {
  const master = await (await fetch(hlsUrl)).text();
  const media = new URL(master.split('\n').find((l) => l && !l.startsWith('#'))!, hlsUrl);
  const text = await (await fetch(media)).text();
  const target = Number(/#EXT-X-TARGETDURATION:(\d+)/.exec(text)?.[1]);
  const durations = [...text.matchAll(/#EXTINF:([\d.]+)/g)].map((m) => Number(m[1]));
  return { target, durations };
}

describe('WHIP publish on a lossy link', () => {
  it('drops 5 % and reorders some: segments keep their durations, the tone decodes', async () => {
    const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Lossy', codec: 'opus', reconnectWindow: 0 })).json;
    const c = await whipConnect(s.whipUrl, s.streamKey);
    try {
      expect(c.status).toBe(201);
      const sent = await c.send(tone, { drop: 0.05, swapEvery: 9 });
      expect(sent.dropped).toBeGreaterThan(10);
      expect(sent.swapped).toBeGreaterThan(10);
      const { target, durations } = await segmentDurations(s.hlsUrl);
      expect(durations.length).toBeGreaterThanOrEqual(3);
      // Every finished segment holds its target's worth of audio: the lost packets were concealed, not skipped.
      for (const d of durations) expect(d).toBeGreaterThan(target / 2);
      const total = durations.reduce((a, b) => a + b, 0);
      expect(total).toBeGreaterThan(tone.length * 0.02 - 2 * target - 0.5);
      // FFmpeg's decoder plays a concealed frame as silence: the zero crossings read a little low.
      const heard = await decodedFrequency(s.hlsUrl, 3, ['-live_start_index', '0']);
      expect(heard.hz).toBeGreaterThan(610);
      expect(heard.hz).toBeLessThan(680);
    } finally {
      await fetch(new URL(c.location!, t.http), { method: 'DELETE' });
      await c.close();
    }
  }, 60_000);
});

describe('WHIP among the other publishers', () => {
  it('takes over from RTMP (newest wins), and RTMP takes it back', async () => {
    const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Takeover', codec: 'aac', reconnectWindow: 5 })).json;
    const rtmp = publish(`${s.rtmpUrl}/${s.streamKey}`, { seconds: 30, frequency: 440 });
    const c = await (async () => {
      await waitFor(async () => (await stream(s.id)).status === 'live', 15_000, 100, 'live over RTMP');
      return whipConnect(s.whipUrl, s.streamKey);
    })();
    try {
      expect(c.status).toBe(201);
      const sending = c.send(tone.slice(0, 500));
      // The RTMP publisher was closed by the newer one.
      expect(await exited(rtmp)).not.toBeNull();
      await new Promise((r) => setTimeout(r, 5000));
      const heard = await decodedFrequency(s.listenUrl, 2);
      expect(heard.hz).toBeGreaterThan(650);
      expect(heard.hz).toBeLessThan(670);
      // An RTMP publisher now takes it back; the WHIP session is gone (its URL answers 404).
      const again = publish(`${s.rtmpUrl}/${s.streamKey}`, { seconds: 8, frequency: 440 });
      const session = new URL(c.location!, t.http);
      await waitFor(async () => (await fetch(session, { method: 'OPTIONS' })).status === 204 && (await api(t.http, t.secretKey, 'GET', `/v2/streams/${s.id}`)).json.status === 'live' && (await decodedFrequency(s.listenUrl, 1)).hz < 460, 20_000, 500, 'RTMP back on air');
      expect((await fetch(session, { method: 'DELETE' })).status).toBe(404);
      await sending;
      again.kill('SIGKILL');
      await exited(again);
    } finally {
      rtmp.kill('SIGKILL');
      await c.close();
    }
  }, 60_000);

  it('closes a publish that has sent no RTP for 10 s', async () => {
    const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Silent peer', codec: 'opus', reconnectWindow: 0 })).json;
    const c = await whipConnect(s.whipUrl, s.streamKey);
    try {
      await c.send(tone.slice(0, 100));
      await waitFor(async () => (await stream(s.id)).status === 'live', 5_000, 100, 'live');
      const quietFrom = Date.now();
      await waitFor(async () => (await stream(s.id)).status === 'idle', 20_000, 200, 'idle after 10 s without RTP');
      expect(Date.now() - quietFrom).toBeGreaterThan(8000);
      expect((await fetch(new URL(c.location!, t.http), { method: 'DELETE' })).status).toBe(404);
    } finally {
      await c.close();
    }
  }, 40_000);
});
