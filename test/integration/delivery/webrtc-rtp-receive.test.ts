/**
 * A WHIP publisher's media path over a real werift connection on loopback
 * (src/delivery/webrtc/rtp-receive.ts): once ICE and DTLS are done, `RtpReceive.attach` takes the
 * SRTP werift's sender writes off the ICE connection — across a sequence wrap (rollover counter
 * 0 → 1, RFC 3711 §3.3.1), with CSRCs, a header extension and padding (RFC 3550 §5.1, §5.3.1) —
 * hands on each payload intact, keeps other payload types and tampered packets out, follows a new
 * SSRC, and sends RTCP receiver reports (RFC 3550 §6.4.2) that the sender sees. Closed, it gives
 * the packets back to werift.
 */
import { describe, expect, it } from 'vitest';
import { RtcpRrPacket, RtpHeader, type RtcpPacket } from 'werift';
import { RtpReceive } from '../../../src/delivery/webrtc/rtp-receive.js';
import { SrtpProtector } from '../../../src/delivery/webrtc/srtp.js';
import { connectWeriftPair, until, WRAP_PAYLOADS, WRAP_SEQ0 } from '../../helpers/werift-pair.js';

interface Got {
  seq: number;
  ts: number;
  payload: Buffer;
  ssrc: number;
}

describe('RtpReceive over a werift connection', () => {
  it('takes the SRTP, sends receiver reports, and gives the packets back when closed', async () => {
    const pair = await connectWeriftPair();
    const { transceiver, close } = pair;
    try {
      const dtls = transceiver.sender.dtlsTransport;
      const ssrc = transceiver.sender.ssrc;
      const rtcp: RtcpPacket[] = [];
      dtls.onRtcp.subscribe((p) => void rtcp.push(p));
      const got: Got[] = [];
      const receiving = pair.client.getTransceivers().find((t) => t.kind === 'audio')!;
      const rx = RtpReceive.attach(receiving, 111, 48000, (seq, ts, payload, s) => void got.push({ seq, ts, payload: Buffer.from(payload), ssrc: s }));
      expect(rx).not.toBeNull();
      const header = (i: number, o: Partial<RtpHeader> = {}) => new RtpHeader({ sequenceNumber: (WRAP_SEQ0 + i) & 0xffff, timestamp: 1_000_000 + i * 960, payloadType: 111, ssrc, marker: i === 0, ...o });
      for (let i = 0; i < WRAP_PAYLOADS.length; i++) {
        const p = WRAP_PAYLOADS[i]!;
        if (i === 3) await dtls.sendRtp(p, header(i, { csrc: [11, 22] }));
        else if (i === 4) await dtls.sendRtp(p, header(i, { extensions: [{ id: 1, payload: Buffer.from([0x42, 0x43]) }] }));
        else if (i === 5) await dtls.sendRtp(Buffer.concat([p, Buffer.from([0, 0, 3])]), header(i, { padding: true }));
        else await dtls.sendRtp(p, header(i));
        if (i === 7) await dtls.sendRtp(Buffer.from('not opus'), header(i, { payloadType: 96, sequenceNumber: 9 }));
        await new Promise((r) => setTimeout(r, 5));
      }
      await until(() => got.length >= WRAP_PAYLOADS.length, 5000, 'packets taken');
      got.forEach((g, i) => {
        expect(g.seq).toBe((WRAP_SEQ0 + i) & 0xffff);
        expect(g.ts).toBe(1_000_000 + i * 960);
        expect(g.ssrc).toBe(ssrc);
        expect(g.payload.equals(WRAP_PAYLOADS[i]!)).toBe(true);
      });
      expect(pair.received.length).toBe(0); // werift's track saw none of them
      expect(rx!.packets).toBe(WRAP_PAYLOADS.length);

      // A tampered datagram on the same socket is dropped and counted; a new SSRC is followed.
      const rejected = rx!.rejected;
      const ice = transceiver.sender.dtlsTransport.iceTransport.connection;
      const forged = Buffer.alloc(40, 7);
      forged[0] = 0x80;
      forged[1] = 111;
      await ice.send(forged);
      await until(() => rx!.rejected > rejected, 5000, 'forged packet rejected');
      await dtls.sendRtp(Buffer.from([1, 2, 3]), header(0, { ssrc: 0x5eed, sequenceNumber: 40_000 }));
      await until(() => got.some((g) => g.ssrc === 0x5eed), 5000, 'new SSRC taken');

      // Receiver reports reach the sender: on an SSRC it sent, its highest extended sequence number.
      await until(() => rtcp.some((p) => p instanceof RtcpRrPacket && p.reports.length > 0), 5000, 'a receiver report');
      const rr = rtcp.find((p): p is RtcpRrPacket => p instanceof RtcpRrPacket && p.reports.length > 0)!;
      expect(rr.ssrc).toBe(receiving.receiver.rtcpSsrc);
      const block = rr.reports[0]!;
      if (block.ssrc === ssrc) {
        expect(block.highestSequence).toBe(0x10000 + ((WRAP_SEQ0 + WRAP_PAYLOADS.length - 1) & 0xffff));
        expect(block.packetsLost).toBe(0);
      } else expect(block.ssrc).toBe(0x5eed);

      // Closed: werift's receive path has the packets again.
      rx!.close();
      // (An SRTP packet of the track's SSRC at index 100, rollover counter 0: where werift's receiver, which saw none, starts.)
      const taken = rx!.packets;
      const c = dtls.srtp.localContext;
      const p = new SrtpProtector({ profile: c.profile, key: c.srtpSessionKey, salt: c.srtpSessionSalt, auth: c.srtpSessionAuthTag }, ssrc);
      const buf = Buffer.alloc(12 + 3 + p.tagLength);
      header(0, { sequenceNumber: 100, marker: false }).serialize(12).copy(buf);
      buf.set([9, 9, 9], 12);
      p.protect(buf, 12, 15, 100, 0);
      await ice.send(buf);
      await until(() => pair.received.length > 0, 5000, 'werift receives again');
      expect(pair.received[0]!.payload.equals(Buffer.from([9, 9, 9]))).toBe(true);
      expect(rx!.packets).toBe(taken);
    } finally {
      await close();
    }
  }, 30_000);
});
