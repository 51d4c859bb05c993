/**
 * Two werift peer connections on loopback, connected (ICE and DTLS done): `server` sends audio
 * (Opus, payload type 111, the server's own peer configuration) and `client` receives it; every
 * RTP packet the client's track decrypts is pushed to `received`. Close both with `close()`.
 */
import { RTCPeerConnection, RTCRtpCodecParameters, type RTCRtpTransceiver, type RtpPacket } from 'werift';
import { peerConfiguration } from '../../src/delivery/webrtc/whep-peer.js';

/** Polls `ok` every 20 ms. @throws Error naming `what` after `ms` */
export async function until(ok: () => boolean, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export interface WeriftPair {
  client: RTCPeerConnection;
  server: RTCPeerConnection;
  /** The server's sending audio transceiver. */
  transceiver: RTCRtpTransceiver;
  /** What the client received, in order. */
  received: RtpPacket[];
  close(): Promise<void>;
}

/** Connects a receiving werift client to a sending server peer on 127.0.0.1 (≤ 10 s). */
export async function connectWeriftPair(): Promise<WeriftPair> {
  const opus = () => new RTCRtpCodecParameters({ mimeType: 'audio/opus', clockRate: 48000, channels: 2, payloadType: 111 });
  const client = new RTCPeerConnection({ codecs: { audio: [opus()], video: [] }, headerExtensions: { audio: [], video: [] }, iceUseIpv6: false, iceAdditionalHostAddresses: ['127.0.0.1'], iceServers: [] });
  const server = new RTCPeerConnection(peerConfiguration({ iceServers: [], allInterfaces: false, hosts: ['127.0.0.1'] }));
  const close = async () => {
    await Promise.allSettled([client.close(), server.close()]);
  };
  try {
    const received: RtpPacket[] = [];
    client.addTransceiver('audio', { direction: 'recvonly' });
    client.onTrack.subscribe((track) => track.onReceiveRtp.subscribe((p) => received.push(p)));
    await client.setLocalDescription(await client.createOffer());
    await until(() => client.iceGatheringState === 'complete', 5000, 'client gathering');
    await server.setRemoteDescription(client.localDescription!);
    const transceiver = server.getTransceivers().find((t) => t.kind === 'audio')!;
    transceiver.setDirection('sendonly');
    await server.setLocalDescription(await server.createAnswer());
    await until(() => server.iceGatheringState === 'complete', 5000, 'server gathering');
    await client.setRemoteDescription(server.localDescription!);
    await until(() => server.connectionState === 'connected' && client.connectionState === 'connected', 10_000, 'connected');
    return { client, server, transceiver, received, close };
  } catch (e) {
    await close();
    throw e;
  }
}

/** 20 payloads of 40–173 bytes; their sequence numbers start at 65530 (they cross the 16-bit wrap), timestamps at 1,000,000 in steps of 960. */
export const WRAP_PAYLOADS = Array.from({ length: 20 }, (_, i) => Buffer.alloc(40 + i * 7, i + 1));
export const WRAP_SEQ0 = 65530;

/**
 * Sends `WRAP_PAYLOADS` with `send(seq, timestamp, payload, marker)` 5 ms apart, waits for the
 * client to receive them and checks each (RFC 3550 §5.1 fields, payload type 111, `ssrc`, bytes).
 */
export async function sendAcrossWrap(pair: WeriftPair, send: (seq: number, ts: number, payload: Buffer, marker: boolean) => unknown, expectFn: (actual: unknown) => { toBe(v: unknown): void }): Promise<void> {
  for (let i = 0; i < WRAP_PAYLOADS.length; i++) {
    send((WRAP_SEQ0 + i) & 0xffff, (1_000_000 + i * 960) >>> 0, WRAP_PAYLOADS[i]!, i === 0);
    await new Promise((r) => setTimeout(r, 5));
  }
  await until(() => pair.received.length >= WRAP_PAYLOADS.length, 5000, 'packets received');
  pair.received.forEach((p, i) => {
    expectFn(p.header.sequenceNumber).toBe((WRAP_SEQ0 + i) & 0xffff);
    expectFn(p.header.timestamp).toBe(1_000_000 + i * 960);
    expectFn(p.header.marker).toBe(i === 0);
    expectFn(p.header.payloadType).toBe(111);
    expectFn(p.header.ssrc).toBe(pair.transceiver.sender.ssrc);
    expectFn(p.payload.equals(WRAP_PAYLOADS[i]!)).toBe(true);
  });
}
