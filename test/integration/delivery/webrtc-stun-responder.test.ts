/**
 * The fan-out's STUN responder (src/delivery/webrtc/stun-responder.ts): over a real werift
 * connection, a connectivity check (RFC 8445 §7.3, consent freshness RFC 7675) that the client
 * sends on the nominated pair's socket (from the pair's address or another of its own) is answered by Skylark, not werift, with a Binding success response
 * werift's own STUN parser verifies (MESSAGE-INTEGRITY under the server's ICE password,
 * FINGERPRINT, XOR-MAPPED-ADDRESS of the client); a check with a wrong MESSAGE-INTEGRITY, or one
 * nominating (USE-CANDIDATE), goes on to werift; once the peer leaves the fan-out werift answers
 * everything again. Meanwhile werift's own consent loop is stopped and Skylark's checks
 * (src/delivery/webrtc/consent.ts) are answered by the client, and the client's SRTCP is dropped
 * before werift.
 */
import { createSocket, type RemoteInfo, type Socket } from 'node:dgram';
import { describe, expect, it } from 'vitest';
import { Message, classes, methods, parseMessage } from 'werift';
import { RtpFanout } from '../../../src/native/rtp-fanout.js';
import { FanoutGroup, type FanoutSession } from '../../../src/delivery/webrtc/fanout.js';
import { bindingSuccess } from '../../../src/delivery/webrtc/stun-responder.js';
import { weriftMediaState } from '../../../src/delivery/webrtc/rtp-sender.js';
import { connectWeriftPair, until } from '../../helpers/werift-pair.js';

interface Agent {
  localUsername: string;
  localPassword: string;
  remoteUsername: string;
  nominated: { remoteAddr: [string, number]; protocol: { transport: { socket: Socket }; onRequestReceived: { subscribe(f: () => void): unknown } } };
}

/** A Binding request as a controlling ICE agent sends it (RFC 8445 §7.2.2), with werift's own STUN encoder. */
function check(username: string, password: string, extra: (m: Message) => void = () => {}): Buffer {
  const m = new Message(methods.BINDING, classes.REQUEST);
  m.setAttribute('USERNAME', username).setAttribute('PRIORITY', 1853824767).setAttribute('ICE-CONTROLLING', BigInt(42));
  extra(m);
  m.addMessageIntegrity(Buffer.from(password, 'utf8')).addFingerprint();
  return m.bytes;
}

describe('StunResponder', () => {
  it('answers the client\'s checks on the nominated pair instead of werift; bad or nominating checks and checks after leaving go to werift', async () => {
    const pair = await connectWeriftPair();
    try {
      const group = new FanoutGroup(new RtpFanout(), { packetsSent: 0, payloadBytesSent: 0, packetsDropped: 0, peersDroppedSlow: 0 }, () => {});
      const session: FanoutSession = { connected: () => true, close: () => {}, demote: () => {} };
      const w = weriftMediaState(pair.transceiver)!;
      const id = group.join(session, w)!;
      expect(id).not.toBeNull();
      const server = w.ice as unknown as Agent;
      // The transactions werift handled. The client's own consent checks (RFC 7675, every 4–6 s) reach
      // it too once the peer has left, so each step looks for its own transaction ID.
      const toWerift = new Set<string>();
      (server.nominated.protocol.onRequestReceived as unknown as { subscribe(f: (m: Message) => void): unknown }).subscribe((m) => toWerift.add(m.transactionIdHex));
      const tid = (b: Buffer) => b.subarray(8, 20).toString('hex');
      // The client's end of the nominated pair: its socket, and the server's address as it sees it.
      const client = (pair.client.getTransceivers()[0]!.receiver.dtlsTransport as unknown as { iceTransport: { connection: Agent } }).iceTransport.connection;
      const sock = client.nominated.protocol.transport.socket;
      const [host, port] = client.nominated.remoteAddr;
      const answers: Buffer[] = [];
      const onMsg = (d: Buffer, r: RemoteInfo) => {
        if (d[0]! < 2 && r.port === port) answers.push(d);
      };
      sock.on('message', onMsg);
      const user = `${server.localUsername}:${server.remoteUsername}`;

      const ok = check(user, server.localPassword);
      sock.send(ok, port, host);
      await until(() => answers.some((a) => tid(a) === tid(ok)), 5000, 'the answer');
      const res = parseMessage(answers.find((a) => tid(a) === tid(ok))!, Buffer.from(server.localPassword, 'utf8'))!;
      expect(res).toBeTruthy();
      expect(res.messageClass).toBe(classes.RESPONSE);
      expect(res.transactionIdHex).toBe(ok.subarray(8, 20).toString('hex'));
      // The client's address as the server's nominated pair has it (the socket is bound to every interface).
      expect(res.getAttributeValue('XOR-MAPPED-ADDRESS')).toEqual([...server.nominated.remoteAddr]);
      expect(server.nominated.remoteAddr[1]).toBe(sock.address().port);
      expect(group.stunAnswered).toBeGreaterThanOrEqual(1);
      expect(toWerift.has(tid(ok))).toBe(false);

      // The same check from another of the client's addresses (a controlling client checks every
      // pair it formed with this socket): answered here too, to its source.
      const other = createSocket('udp4');
      await new Promise<void>((r) => other.bind(0, '127.0.0.1', () => r()));
      const otherAnswers: Buffer[] = [];
      other.on('message', (d) => otherAnswers.push(d));
      const fromOther = check(user, server.localPassword);
      other.send(fromOther, port, host);
      await until(() => otherAnswers.length === 1, 5000, 'the answer to the other address');
      expect(parseMessage(otherAnswers[0]!, Buffer.from(server.localPassword, 'utf8'))!.getAttributeValue('XOR-MAPPED-ADDRESS')).toEqual(['127.0.0.1', other.address().port]);
      other.close();
      expect(group.stunAnswered).toBeGreaterThanOrEqual(2);
      expect(toWerift.has(tid(fromOther))).toBe(false);

      // A wrong MESSAGE-INTEGRITY, and a nomination: werift's to handle.
      const badIntegrity = check(user, 'not-the-password');
      const nominating = check(user, server.localPassword, (m) => m.setAttribute('USE-CANDIDATE', null));
      sock.send(badIntegrity, port, host);
      sock.send(nominating, port, host);
      await until(() => toWerift.has(tid(badIntegrity)) && toWerift.has(tid(nominating)), 5000, 'werift handling both');

      // Our consent checks replace werift's loop (RFC 7675 §5.1): werift's stopped, ours answered by
      // the client (werift), the peer still allowed to send.
      expect((server as unknown as { queryConsentHandle?: unknown }).queryConsentHandle).toBeUndefined();
      await until(() => group.consentChecks.fresh >= 1, 10_000, 'an answered consent check of ours');
      expect(w.ice.canSendApplicationData()).toBe(true);
      // The client's SRTCP is dropped before werift (a receiver report's first bytes: V=2, PT 201).
      sock.send(Buffer.from([0x80, 201, 0, 1, 0, 0, 0, 7]), port, host);
      await until(() => group.rtcpIgnored === 1, 5000, 'the RTCP packet dropped');

      // Out of the fan-out: werift answers again.
      group.leave(id);
      const afterLeave = check(user, server.localPassword);
      sock.send(afterLeave, port, host);
      await until(() => toWerift.has(tid(afterLeave)), 5000, 'werift handling the check after leave');
      sock.off('message', onMsg);
    } finally {
      await pair.close();
    }
  }, 30_000);

  it('builds a response werift verifies for an IPv6 remote', () => {
    const req = check('a:b', 'pw');
    const res = parseMessage(bindingSuccess(req, '2001:db8::7', 5004, 'pw'), Buffer.from('pw'))!;
    expect(res).toBeTruthy();
    expect(res.getAttributeValue('XOR-MAPPED-ADDRESS')).toEqual(['2001:db8::7', 5004]);
  });
});
