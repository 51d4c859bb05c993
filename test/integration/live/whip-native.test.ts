/**
 * The native WHIP receive (docs/behaviour.md "Go live over WHIP", `SKYLARK_WHIP_NATIVE_RECEIVE`):
 * a werift publisher's SRTP is read, decrypted, ordered and — for an `opus` stream — segmented in
 * native code. Over a lossy link (5 % dropped, some reordered) the native jitter buffer counts the
 * packets, the losses and the reordering, the packets go into the segmenter without JavaScript,
 * HLS keeps its durations and decodes the tone; an `aac` stream takes the ordered packets in JS
 * (its encoder) and still plays the tone, while a flood of forged RTP (no valid SRTP tag, the
 * publisher's SSRC or random ones) is dropped and counted with nothing held; with the ABR ladder off the routed socket is read on
 * merge ticks (`SKYLARK_INGEST_MERGE_MS`), the kernel's receive times keeping the jitter buffer
 * right; closing the peer releases the receive; with the setting off the JavaScript path is used.
 */
import { createSocket } from 'node:dgram';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, startInProcess, tempDir, waitFor, type TestServer } from '../../helpers/server.js';
import { decodedFrequency, toneOpusPackets, whipConnect } from '../../helpers/whip-client.js';

let t: TestServer;
const tmp = tempDir('skylark-whip-native-');
let tone: Buffer[];
beforeAll(async () => {
  // The ABR ladder off: the publish is routed into its segmenter alone, with merged reads (as the
  // bench measures it); test/integration/live/whip.test.ts runs with the ladder on (every packet
  // also to JS for the ladder's encoder).
  t = await startInProcess({ SKYLARK_ABR_LADDER: '0' });
  tone = toneOpusPackets(tmp.dir, 660, 12);
});
afterAll(async () => {
  await t?.close();
  tmp.cleanup();
});

const stream = async (server: TestServer, id: string) => (await api(server.http, server.secretKey, 'GET', `/v2/streams/${id}`)).json;

/**
 * Sends `count` forged RTP datagrams (Opus payload type, random payload, no valid SRTP tag) to
 * every UDP host candidate of `answer` on 127.0.0.1, half with `ssrc`, half with random SSRCs.
 */
async function forge(answer: string, ssrc: number, count: number): Promise<number> {
  const ports = [...answer.matchAll(/a=candidate:\S+ 1 udp \d+ 127\.0\.0\.1 (\d+) typ host/gi)].map((m) => Number(m[1]));
  expect(ports.length).toBeGreaterThan(0);
  const sock = createSocket('udp4');
  let sent = 0;
  for (let i = 0; i < count; i++) {
    const d = randomBytes(200);
    d[0] = 0x80;
    d[1] = 111;
    d.writeUInt32BE(i % 2 ? ssrc >>> 0 : d.readUInt32BE(8), 8);
    for (const port of ports) {
      await new Promise<void>((r) => sock.send(d, port, '127.0.0.1', () => r()));
      sent++;
    }
    if (i % 50 === 49) await new Promise((r) => setTimeout(r, 5)); // the socket buffer is not the test
  }
  sock.close();
  return sent;
}

/** The EXTINF durations (s) of the stream's first media playlist, and its target duration. */
async function segmentDurations(hlsUrl: string): Promise<{ target: number; durations: number[] }> {
  const master = await (await fetch(hlsUrl)).text();
  const media = new URL(master.split('\n').find((l) => l && !l.startsWith('#'))!, hlsUrl);
  const text = await (await fetch(media)).text();
  const target = Number(/#EXT-X-TARGETDURATION:(\d+)/.exec(text)?.[1]);
  return { target, durations: [...text.matchAll(/#EXTINF:([\d.]+)/g)].map((m) => Number(m[1])) };
}

describe('WHIP native receive', () => {
  it('an opus stream over a lossy link: counted, ordered and segmented natively; HLS keeps durations and decodes the tone', async () => {
    const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Native', codec: 'opus', reconnectWindow: 0 })).json;
    const c = await whipConnect(s.whipUrl, s.streamKey);
    try {
      expect(c.status).toBe(201);
      const sending = c.send(tone, { drop: 0.05, swapEvery: 9 });
      await waitFor(() => t.server.whip.stats().nativeReceives === 1, 10_000, 50, 'the native receive attached');
      await waitFor(async () => (await stream(t, s.id)).status === 'live', 10_000, 100, 'live');
      const sent = await sending;
      expect(sent.dropped).toBeGreaterThan(10);
      expect(sent.swapped).toBeGreaterThan(10);
      // The last packets may still wait in the socket (merged reads) or for a gap's deadline.
      await waitFor(() => t.server.whip.stats().native[0]?.held === 0 && t.server.whip.stats().native[0]!.msSinceLastRtp! > 150, 3_000, 20, 'the jitter buffer drained');
      const [n] = t.server.whip.stats().native;
      expect(n).toBeDefined();
      // Every packet that arrived was authenticated and counted natively, none rejected.
      expect(n!.packets, JSON.stringify(n)).toBeGreaterThan(tone.length * 0.9);
      expect(n!.packets, JSON.stringify(n)).toBeLessThanOrEqual(tone.length);
      expect(n!.rejected, JSON.stringify(n)).toBe(0);
      expect(n!.reordered, JSON.stringify(n)).toBeGreaterThan(10);
      expect(n!.lost, JSON.stringify(n)).toBeGreaterThan(10);
      expect(n!.filled, JSON.stringify(n)).toBeGreaterThanOrEqual(n!.lost);
      // Once live, the packets went into the segmenter in C++ (PLC frames for the lost ones included).
      expect(n!.segmented, JSON.stringify(n)).toBeGreaterThan(tone.length * 0.8);
      expect(n!.held, JSON.stringify(n)).toBe(0);
      // Routed, the socket was read on merge ticks (SKYLARK_INGEST_MERGE_MS), many datagrams at a time.
      expect(n!.mergedReads, JSON.stringify(n)).toBeGreaterThan(10);
      const { target, durations } = await segmentDurations(s.hlsUrl);
      expect(durations.length).toBeGreaterThanOrEqual(3);
      for (const d of durations) expect(d).toBeGreaterThan(target / 2);
      const heard = await decodedFrequency(s.hlsUrl, 3, ['-live_start_index', '0']);
      expect(heard.hz).toBeGreaterThan(610);
      expect(heard.hz).toBeLessThan(680);
      const del = await fetch(new URL(c.location!, t.http), { method: 'DELETE' });
      expect(del.status).toBe(200);
      // Closing the peer releases the native receive.
      await waitFor(() => t.server.whip.stats().nativeReceives === 0, 5_000, 50, 'the native receive released');
      await waitFor(async () => (await stream(t, s.id)).status === 'idle', 10_000, 100, 'idle after DELETE');
    } finally {
      await c.close();
    }
  }, 60_000);

  it('an aac stream: the natively ordered packets go to its encoder; forged RTP is dropped and counted; the tone is heard', async () => {
    const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Native AAC', codec: 'aac', reconnectWindow: 0 })).json;
    const c = await whipConnect(s.whipUrl, s.streamKey);
    try {
      const sending = c.send(tone);
      await waitFor(() => t.server.whip.stats().nativeReceives === 1, 10_000, 50, 'the native receive attached');
      await waitFor(async () => (await stream(t, s.id)).status === 'live', 10_000, 100, 'live');
      // A stranger's flood of RTP that does not authenticate: dropped and counted, nothing held.
      const ssrc = t.server.whip.stats().native[0]?.ssrc ?? 0;
      const forged = await forge(c.body, ssrc, 1000);
      await sending;
      const [n] = t.server.whip.stats().native;
      expect(n!.rejected, JSON.stringify(n)).toBeGreaterThan(forged * 0.9);
      expect(n!.rejected, JSON.stringify(n)).toBeLessThanOrEqual(forged);
      expect(n!.ssrc, JSON.stringify(n)).toBe(ssrc);
      expect(n!.held, JSON.stringify(n)).toBe(0);
      expect(n!.packets, JSON.stringify(n)).toBeGreaterThan(tone.length - 10); // the first few may arrive before the receive attached
      expect(n!.segmented, JSON.stringify(n)).toBe(0); // the encoder's output is what the segmenter gets
      expect(n!.mergedReads, JSON.stringify(n)).toBe(0); // not routed: read as datagrams arrive
      const heard = await decodedFrequency(s.hlsUrl, 3, ['-live_start_index', '0']);
      expect(heard.hz).toBeGreaterThan(650);
      expect(heard.hz).toBeLessThan(670);
    } finally {
      await fetch(new URL(c.location!, t.http), { method: 'DELETE' });
      await c.close();
    }
  }, 60_000);

  it('SKYLARK_WHIP_NATIVE_RECEIVE=0 keeps the JavaScript receive path', async () => {
    const off = await startInProcess({ SKYLARK_WHIP_NATIVE_RECEIVE: '0' });
    try {
      const s = (await api(off.http, off.secretKey, 'POST', '/v2/streams', { title: 'JS path', codec: 'opus', reconnectWindow: 0 })).json;
      const c = await whipConnect(s.whipUrl, s.streamKey);
      try {
        const sending = c.send(tone.slice(0, 150));
        await waitFor(async () => (await stream(off, s.id)).status === 'live', 10_000, 100, 'live');
        await sending;
        await waitFor(() => off.server.whip.stats().packetsReceived === 150, 5_000, 50, 'every packet received');
        expect(off.server.whip.stats().nativeReceives).toBe(0);
      } finally {
        await fetch(new URL(c.location!, off.http), { method: 'DELETE' });
        await c.close();
      }
    } finally {
      await off.close();
    }
  }, 60_000);
});
