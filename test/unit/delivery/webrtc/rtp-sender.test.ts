/**
 * The fan-out's media path over a real werift connection on loopback: once ICE and DTLS are done,
 * `RtpSender.attach` finds werift's SRTP session and nominated UDP pair (it does not fall back),
 * and the packets it writes are decrypted, authenticated and parsed by werift's own receiver —
 * payload, sequence numbers, timestamps, marker, payload type and the SSRC of the answer intact
 * (RFC 3550 §5.1, RFC 3711, RFC 7587).
 */
import { describe, expect, it } from 'vitest';
import { RTCPeerConnection, RTCRtpCodecParameters, type RtpPacket } from 'werift';
import { RtpSender } from '../../../../src/delivery/webrtc/rtp-sender.js';
import { peerConfiguration } from '../../../../src/delivery/webrtc/whep.js';

async function until(ok: () => boolean, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('RtpSender over a werift connection', () => {
  it('sends SRTP that werift receives intact', async () => {
    const opus = () => new RTCRtpCodecParameters({ mimeType: 'audio/opus', clockRate: 48000, channels: 2, payloadType: 111 });
    const client = new RTCPeerConnection({ codecs: { audio: [opus()], video: [] }, headerExtensions: { audio: [], video: [] }, iceUseIpv6: false, iceAdditionalHostAddresses: ['127.0.0.1'], iceServers: [] });
    const server = new RTCPeerConnection(peerConfiguration({ iceServers: [], allInterfaces: false, hosts: ['127.0.0.1'] }));
    try {
      const got: RtpPacket[] = [];
      client.addTransceiver('audio', { direction: 'recvonly' });
      client.onTrack.subscribe((track) => track.onReceiveRtp.subscribe((p) => got.push(p)));
      await client.setLocalDescription(await client.createOffer());
      await until(() => client.iceGatheringState === 'complete', 5000, 'client gathering');
      await server.setRemoteDescription(client.localDescription!);
      const transceiver = server.getTransceivers().find((t) => t.kind === 'audio')!;
      transceiver.setDirection('sendonly');
      await server.setLocalDescription(await server.createAnswer());
      await until(() => server.iceGatheringState === 'complete', 5000, 'server gathering');
      await client.setRemoteDescription(server.localDescription!);
      await until(() => server.connectionState === 'connected' && client.connectionState === 'connected', 10_000, 'connected');

      const sender = RtpSender.attach(transceiver);
      expect(sender).not.toBeNull();
      expect(sender!.ssrc).toBe(transceiver.sender.ssrc);
      const payloads = Array.from({ length: 20 }, (_, i) => Buffer.alloc(40 + i * 7, i + 1));
      const seq0 = 65530; // crosses the 16-bit wrap: the rollover counter goes to 1
      for (let i = 0; i < payloads.length; i++) {
        expect(sender!.send((seq0 + i) & 0xffff, (1_000_000 + i * 960) >>> 0, payloads[i]!, i === 0)).toBe(true);
        await new Promise((r) => setTimeout(r, 5));
      }
      await until(() => got.length >= payloads.length, 5000, 'packets received');
      got.forEach((p, i) => {
        expect(p.header.sequenceNumber).toBe((seq0 + i) & 0xffff);
        expect(p.header.timestamp).toBe(1_000_000 + i * 960);
        expect(p.header.marker).toBe(i === 0);
        expect(p.header.payloadType).toBe(111);
        expect(p.header.ssrc).toBe(transceiver.sender.ssrc);
        expect(p.payload.equals(payloads[i]!)).toBe(true);
      });
      expect(sender!.packets).toBe(payloads.length);
    } finally {
      await Promise.allSettled([client.close(), server.close()]);
    }
  }, 30_000);
});
