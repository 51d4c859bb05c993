/**
 * RTCP of the native WHIP receive (docs/behaviour.md "Go live over WHIP", `SKYLARK_WHIP_NATIVE_RTCP`):
 * a real werift publisher's sender reports are opened natively (SRTCP, RFC 3711 §3.4) and its
 * receiver reports are written, SRTCP-protected and sent natively (RFC 3550 §6.4.2) — werift's
 * sender decrypts them, finds its own SSRC's block with the loss it caused, and measures a round
 * trip from their LSR/DLSR (it only does when LSR is its last SR's and DLSR is set); its consent
 * checks (RFC 7675) are answered without werift and it stays connected past werift's 30 s consent
 * expiry, as the server does with its own consent checks sent without werift's loop — and a
 * publisher that stops answering those loses consent, which ends the publish; forged SRTCP is dropped and counted; both SRTP profiles (AES-GCM, AES-CM). With the setting
 * off, werift’s SRTCP carries them.
 */
import { createSocket, type RemoteInfo, type Socket } from 'node:dgram';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RtcpRrPacket } from 'werift';
import { api, startInProcess, tempDir, waitFor, type TestServer } from '../../helpers/server.js';
import { toneOpusPackets, whipConnect, type WhipClient } from '../../helpers/whip-client.js';

let t: TestServer;
const tmp = tempDir('skylark-whip-rtcp-');
let tone: Buffer[];
beforeAll(async () => {
  t = await startInProcess({ SKYLARK_ABR_LADDER: '0' });
  tone = toneOpusPackets(tmp.dir, 660, 40);
});
afterAll(async () => {
  await t?.close();
  tmp.cleanup();
});

/** The receiver report blocks on the publisher's own SSRC that reach its sender, in order. */
function reports(c: WhipClient): { highest: number; lost: number; fraction: number }[] {
  const sender = c.pc.getTransceivers()[0]!.sender;
  const out: { highest: number; lost: number; fraction: number }[] = [];
  sender.onRtcp.subscribe((r) => {
    if (!(r instanceof RtcpRrPacket)) return;
    const b = r.reports.find((x) => x.ssrc === sender.ssrc);
    if (b) out.push({ highest: b.highestSequence, lost: b.packetsLost, fraction: b.fractionLost });
  });
  return out;
}

/** Sends `count` forged SRTCP datagrams (a sender report's header, random bytes, no valid tag) to the answer's host candidates. */
async function forgeSrtcp(answer: string, count: number): Promise<number> {
  const ports = [...answer.matchAll(/a=candidate:\S+ 1 udp \d+ 127\.0\.0\.1 (\d+) typ host/gi)].map((m) => Number(m[1]));
  expect(ports.length).toBeGreaterThan(0);
  const sock = createSocket('udp4');
  let sent = 0;
  for (let i = 0; i < count; i++) {
    const d = randomBytes(80);
    d[0] = 0x80;
    d[1] = 200;
    d.writeUInt16BE(6, 2);
    for (const port of ports) {
      await new Promise<void>((r) => sock.send(d, port, '127.0.0.1', () => r()));
      sent++;
    }
    if (i % 10 === 9) await new Promise((r) => setTimeout(r, 20)); // the socket's buffer (read every 100 ms) is not the test
  }
  sock.close();
  return sent;
}

/** The SRTP protection profile the publisher's DTLS negotiated (RFC 5764 §4.1.2). */
const profile = (c: WhipClient) => (c.pc.dtlsTransports[0]?.srtp as unknown as { localContext?: { profile?: number } } | undefined)?.localContext?.profile;

const stream = async (server: TestServer, id: string) => (await api(server.http, server.secretKey, 'GET', `/v2/streams/${id}`)).json;

describe('WHIP native RTCP', () => {
  it('reports reach werift with its loss and a round trip; consent is answered natively past its expiry; forged SRTCP is counted', async () => {
    const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'RTCP', codec: 'opus', reconnectWindow: 0 })).json;
    const c = await whipConnect(s.whipUrl, s.streamKey);
    try {
      expect(profile(c)).toBe(0x0007);
      const got = reports(c);
      const sending = c.send(tone.slice(0, 36 * 50), { drop: 0.03, swapEvery: 11 });
      await waitFor(() => t.server.whip.stats().nativeReceives === 1, 10_000, 50, 'the native receive attached');
      await waitFor(async () => (await stream(t, s.id)).status === 'live', 10_000, 100, 'live');
      const forged = await forgeSrtcp(c.body, 300);
      const sent = await sending;
      // 36 s after connecting: past werift's consent expiry (30 s after the last valid answer), with
      // every consent check of the publisher answered by the server's native path.
      expect(c.pc.connectionState).toBe('connected');
      const [n] = t.server.whip.stats().native;
      expect(n!.consentAnswered, JSON.stringify(n)).toBeGreaterThanOrEqual(5);
      // The server's own consent checks (./consent.ts, not werift's loop), each answered by werift.
      expect(n!.consentSent, JSON.stringify(n)).toBeGreaterThanOrEqual(5);
      expect(n!.consentFresh, JSON.stringify(n)).toBeGreaterThanOrEqual(n!.consentSent - 1);
      expect(t.server.whip.stats().nativeReceives).toBe(1);
      expect((await stream(t, s.id)).status).toBe('live');
      expect(n!.srtcpRejected, JSON.stringify(n)).toBeGreaterThanOrEqual(forged * 0.9);
      expect(n!.srtcpRejected, JSON.stringify(n)).toBeLessThanOrEqual(forged);
      // The publisher's own sender reports (one every 0.5–1.5 s) were opened natively.
      expect(n!.srtcp, JSON.stringify(n)).toBeGreaterThan(15);
      expect(n!.reportsSent, JSON.stringify(n)).toBeGreaterThan(15);
      // A report that saw the last packet (one sent while it was still on its way does not, on a
      // loaded machine): its cumulative loss is what the link dropped.
      const highest = (1000 + 36 * 50 - 1) & 0xffff;
      await waitFor(() => (got[got.length - 1]!.highest & 0xffff) === highest, 5_000, 50, 'a report after the last packet');
      const last = got[got.length - 1]!;
      expect(got.length).toBeGreaterThan(15);
      expect(last.highest & 0xffff).toBe(highest);
      expect(last.lost).toBeGreaterThanOrEqual(sent.dropped - 1);
      expect(last.lost).toBeLessThanOrEqual(sent.dropped);
      expect(got.some((r) => r.fraction > 0)).toBe(true);
      // werift's sender measured round trips from LSR/DLSR: both right, on this machine's loopback.
      const sender = c.pc.getTransceivers()[0]!.sender as unknown as { rtt?: number; roundTripTimeMeasurements: number };
      expect(sender.roundTripTimeMeasurements).toBeGreaterThanOrEqual(3);
      expect(sender.rtt!).toBeGreaterThanOrEqual(0);
      expect(sender.rtt!).toBeLessThan(0.25);
    } finally {
      await fetch(new URL(c.location!, t.http), { method: 'DELETE' });
      await c.close();
    }
  }, 90_000);

  // The long test above runs on werift's first choice (AEAD_AES_128_GCM); the other profile here.
  it('AES_CM_128_HMAC_SHA1_80: the reports reach werift with its loss and a round trip', async () => {
    const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'RTCP CM', codec: 'opus', reconnectWindow: 0 })).json;
    const c = await whipConnect(s.whipUrl, s.streamKey, { srtpProfiles: [0x0001] });
    try {
      expect(profile(c)).toBe(0x0001);
      const got = reports(c);
      const sent = await c.send(tone.slice(0, 8 * 50), { drop: 0.03, swapEvery: 11 });
      const count = got.length;
      await waitFor(() => got.length > count, 3_000, 50, 'a report after the last packet');
      const last = got[got.length - 1]!;
      expect(last.highest & 0xffff).toBe((1000 + 8 * 50 - 1) & 0xffff);
      expect(last.lost).toBeGreaterThanOrEqual(sent.dropped - 1);
      expect(last.lost).toBeLessThanOrEqual(sent.dropped);
      const sender = c.pc.getTransceivers()[0]!.sender as unknown as { rtt?: number; roundTripTimeMeasurements: number };
      expect(sender.roundTripTimeMeasurements).toBeGreaterThanOrEqual(1);
      expect(sender.rtt!).toBeGreaterThanOrEqual(0);
      expect(sender.rtt!).toBeLessThan(0.25);
      const n = t.server.whip.stats().native.find((x) => x.reportsSent > 0 && x.srtcp > 0 && x.consentAnswered >= 1);
      expect(n, JSON.stringify(t.server.whip.stats().native)).toBeDefined();
    } finally {
      await fetch(new URL(c.location!, t.http), { method: 'DELETE' });
      await c.close();
    }
  }, 60_000);

  it('a publisher that stops answering the server’s consent checks loses consent: the publish ends', async () => {
    const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'RTCP consent', codec: 'opus', reconnectWindow: 0 })).json;
    const c = await whipConnect(s.whipUrl, s.streamKey);
    try {
      // The publisher's socket drops every STUN Binding request it gets (the server's consent
      // checks); its own checks and their answers, DTLS and media go on.
      // (Every socket of its agent: the server checks the pair it nominated, which need not be the
      // one the publisher nominated.)
      const ice = (c.pc.dtlsTransports[0] as unknown as { iceTransport: { connection: { protocols: { transport?: { socket?: Socket } }[] } } }).iceTransport.connection;
      const sockets = ice.protocols.map((p) => p.transport?.socket).filter((x): x is Socket => !!x);
      expect(sockets.length).toBeGreaterThan(0);
      for (const socket of sockets) {
        const theirs = socket.listeners('message') as ((d: Buffer, r: RemoteInfo) => void)[];
        socket.removeAllListeners('message');
        socket.on('message', (d: Buffer, r: RemoteInfo) => {
          if (d.length >= 20 && d.readUInt16BE(0) === 0x0001) return;
          for (const l of theirs) l.call(socket, d, r);
        });
      }
      const sending = c.send(tone.slice(0, 40 * 50));
      await waitFor(async () => (await stream(t, s.id)).status === 'live', 10_000, 100, 'live');
      // RFC 7675 §5.1: 30 s after the last answer (checks every 4–6 s): the publish ends.
      await waitFor(async () => (await stream(t, s.id)).status === 'idle', 45_000, 250, 'idle once consent expired');
      expect(t.server.whip.stats().nativeReceives).toBe(0);
      await sending;
    } finally {
      await c.close();
    }
  }, 90_000);

  it('SKYLARK_WHIP_NATIVE_RTCP=0: the reports go through werift, consent is werift’s', async () => {
    const off = await startInProcess({ SKYLARK_ABR_LADDER: '0', SKYLARK_WHIP_NATIVE_RTCP: '0' });
    try {
      const s = (await api(off.http, off.secretKey, 'POST', '/v2/streams', { title: 'RTCP off', codec: 'opus', reconnectWindow: 0 })).json;
      const c = await whipConnect(s.whipUrl, s.streamKey);
      try {
        const got = reports(c);
        await c.send(tone.slice(0, 150));
        await waitFor(() => got.length > 0, 3_000, 50, 'a receiver report');
        const [n] = off.server.whip.stats().native;
        expect(n!.reportsSent).toBe(0);
        expect(n!.srtcp).toBe(0);
        expect(n!.consentAnswered).toBe(0);
        expect(n!.consentSent).toBe(0);
      } finally {
        await fetch(new URL(c.location!, off.http), { method: 'DELETE' });
        await c.close();
      }
    } finally {
      await off.close();
    }
  }, 60_000);
});
