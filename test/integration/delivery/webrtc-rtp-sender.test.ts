/**
 * The fan-out's media path over a real werift connection on loopback: once ICE and DTLS are done,
 * `RtpSender.attach` finds werift's SRTP session and nominated UDP pair (it does not fall back),
 * and the packets it writes are decrypted, authenticated and parsed by werift's own receiver —
 * payload, sequence numbers, timestamps, marker, payload type and the SSRC of the answer intact
 * (RFC 3550 §5.1, RFC 3711, RFC 7587).
 */
import { describe, expect, it } from 'vitest';
import { RtpSender } from '../../../src/delivery/webrtc/rtp-sender.js';
import { connectWeriftPair, sendAcrossWrap, WRAP_PAYLOADS } from '../../helpers/werift-pair.js';

describe('RtpSender over a werift connection', () => {
  it('sends SRTP that werift receives intact', async () => {
    const pair = await connectWeriftPair();
    const { transceiver, close } = pair;
    try {
      const sender = RtpSender.attach(transceiver);
      expect(sender).not.toBeNull();
      expect(sender!.ssrc).toBe(transceiver.sender.ssrc);
      await sendAcrossWrap(pair, (seq, ts, payload, marker) => expect(sender!.send(seq, ts, payload, marker)).toBe(true), expect);
      expect(sender!.packets).toBe(WRAP_PAYLOADS.length);
    } finally {
      await close();
    }
  }, 30_000);
});
