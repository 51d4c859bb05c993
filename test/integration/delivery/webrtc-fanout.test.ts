/**
 * The native fan-out (native/io/rtp_fanout.h, src/native/rtp-fanout.ts,
 * src/delivery/webrtc/fanout.ts): its SRTP packets equal the JS SrtpProtector's byte for byte for
 * both profiles (RFC 3711 §4.1.1/§4.2, RFC 7714 §8) across a sequence wrap (rollover counter,
 * RFC 3711 §3.3.1), its AES-CM key stream is RFC 3711 Appendix B.2's, werift's own SRTP receiver
 * decrypts what it writes to a real UDP socket, a removed peer or a closed socket is never written,
 * and a FanoutGroup over a real werift connection delivers packets werift's receiver parses.
 */
import { randomBytes } from 'node:crypto';
import dgram from 'node:dgram';
import { describe, expect, it, vi } from 'vitest';
import { SrtpSession } from 'werift';
import { RtpFanout, type RtpFanoutPeer } from '../../../src/native/rtp-fanout.js';
import { PROFILE_AEAD_AES_128_GCM, PROFILE_AES128_CM_HMAC_SHA1_80, SrtpProtector } from '../../../src/delivery/webrtc/srtp.js';
import { CHECK_MS, FanoutGroup, PEER_MAX_DROPPING_MS, socketFd, type FanoutSession, type SrtpIndex } from '../../../src/delivery/webrtc/fanout.js';
import { weriftMediaState, type IceAgent } from '../../../src/delivery/webrtc/rtp-sender.js';
import { connectWeriftPair, sendAcrossWrap, until, WRAP_PAYLOADS } from '../../helpers/werift-pair.js';

const hex = (s: string) => Buffer.from(s.replace(/\s+/g, ''), 'hex');
const PROFILES = [['AES_CM_128_HMAC_SHA1_80', PROFILE_AES128_CM_HMAC_SHA1_80], ['AEAD_AES_128_GCM', PROFILE_AEAD_AES_128_GCM]] as const;

/** A JS RTP packet (RFC 3550 §5.1) protected by SrtpProtector, as rtp-sender.ts builds it. */
function jsPacket(p: SrtpProtector, ssrc: number, pt: number, seq: number, ts: number, payload: Buffer, marker: boolean, roc: number): Buffer {
  const len = 12 + payload.length;
  const b = Buffer.alloc(len + p.tagLength);
  b[0] = 0x80;
  b[1] = (marker ? 0x80 : 0) | pt;
  b.writeUInt16BE(seq, 2);
  b.writeUInt32BE(ts >>> 0, 4);
  b.writeUInt32BE(ssrc >>> 0, 8);
  payload.copy(b, 12);
  p.protect(b, 12, len, seq, roc);
  return b;
}

/** A pair of werift SRTP sessions: `tx` derives the session keys (RFC 3711 §4.3), `rx` decrypts. */
function sessions(profile: number) {
  const saltLen = profile === PROFILE_AEAD_AES_128_GCM ? 12 : 14;
  const k = randomBytes(16), s = randomBytes(saltLen), k2 = randomBytes(16), s2 = randomBytes(saltLen);
  const tx = new SrtpSession({ profile, keys: { localMasterKey: k, localMasterSalt: s, remoteMasterKey: k2, remoteMasterSalt: s2 } });
  const rx = new SrtpSession({ profile, keys: { localMasterKey: k2, localMasterSalt: s2, remoteMasterKey: k, remoteMasterSalt: s } });
  const c = tx.localContext;
  return { rx, keys: { profile, key: c.srtpSessionKey, salt: c.srtpSessionSalt, auth: profile === PROFILE_AES128_CM_HMAC_SHA1_80 ? c.srtpSessionAuthTag : null } };
}

async function udp(): Promise<dgram.Socket> {
  const s = dgram.createSocket('udp4');
  await new Promise<void>((r) => s.bind(0, '127.0.0.1', r));
  return s;
}

describe('RtpFanout (native)', () => {
  it('AES-CM key stream matches RFC 3711 Appendix B.2', () => {
    const f = new RtpFanout();
    const id = f.add({ fd: 0, host: '127.0.0.1', port: 9, ssrc: 0, payloadType: 0, profile: PROFILE_AES128_CM_HMAC_SHA1_80, key: hex('2B7E151628AED2A6ABF7158809CF4F3C'), salt: hex('F0F1F2F3F4F5F6F7F8F9FAFBFCFD'), auth: Buffer.alloc(20) });
    const out = f.protect(id, 0, 0, Buffer.alloc(48), false)!;
    expect(out.length).toBe(12 + 48 + 10);
    expect(out.subarray(12, 60).toString('hex').toUpperCase()).toBe('E03EAD0935C95E80E166B16DD92B4EB4' + 'D23513162B02D0F72A43A2FE4A5F97AB' + '41E95B3BB0A2E8DD477901E4FCA894C0');
  });

  for (const [name, profile] of PROFILES) {
    it(`${name}: byte for byte the JS SrtpProtector's packets, across a sequence wrap`, () => {
      const { keys } = sessions(profile);
      const ssrc = 0x9abcdef0;
      const f = new RtpFanout();
      const id = f.add({ fd: 0, host: '127.0.0.1', port: 9, ssrc, payloadType: 111, ...keys });
      const js = new SrtpProtector({ profile, key: keys.key, salt: keys.salt, auth: keys.auth ?? undefined }, ssrc);
      let seq = 65520, roc = 0;
      for (let i = 0; i < 40; i++) {
        const payload = randomBytes((i * 37) % 300); // 0..299 bytes: partial blocks, empty payloads
        const ts = (0xfffff000 + i * 960) >>> 0;
        const native = f.protect(id, seq, ts, payload, i === 0)!;
        expect(native.equals(jsPacket(js, ssrc, 111, seq, ts, payload, i === 0, roc))).toBe(true);
        seq = (seq + 1) & 0xffff;
        if (seq === 0) roc++;
      }
      expect(roc).toBe(1);
    });

    it(`${name}: byte for byte the JS SrtpProtector's packets for payloads of many key-stream blocks, up to the largest`, () => {
      const { keys } = sessions(profile);
      const f = new RtpFanout();
      const id = f.add({ fd: 0, host: '127.0.0.1', port: 9, ssrc: 7, payloadType: 111, ...keys });
      const js = new SrtpProtector({ profile, key: keys.key, salt: keys.salt, auth: keys.auth ?? undefined }, 7);
      // Across the 64-block passes of the key stream (1,024 bytes) and the fan-out's first buffer sizes.
      const sizes = [1023, 1024, 1025, 1500, 1501, 2049, 4000, 65_479, 17];
      sizes.forEach((n, seq) => {
        const payload = randomBytes(n);
        expect(f.protect(id, seq, seq * 960, payload, false)!.equals(jsPacket(js, 7, 111, seq, seq * 960, payload, false, 0))).toBe(true);
      });
    });

    it(`${name}: werift's SRTP receiver decrypts what it writes to a UDP socket, rollover counter 0 → 1`, async () => {
      const { rx, keys } = sessions(profile);
      const [tx, sink] = [await udp(), await udp()];
      try {
        const got: Buffer[] = [];
        sink.on('message', (m) => got.push(m));
        const f = new RtpFanout();
        const id = f.add({ fd: socketFd(tx)!, host: '127.0.0.1', port: sink.address().port, ssrc: 77, payloadType: 111, ...keys });
        const payloads = Array.from({ length: 12 }, (_, i) => randomBytes(20 + i * 13));
        for (let i = 0; i < payloads.length; i++) expect(f.send((65530 + i) & 0xffff, 1000 + i * 960, payloads[i]!, false)).toBe(1);
        await until(() => got.length === payloads.length, 5000, 'datagrams');
        got.forEach((m, i) => {
          const plain = rx.decrypt(m);
          expect(plain.readUInt16BE(2)).toBe((65530 + i) & 0xffff);
          expect(plain.readUInt32BE(8)).toBe(77);
          expect(plain.subarray(12, 12 + payloads[i]!.length).equals(payloads[i]!)).toBe(true);
        });
        const c = new Float64Array(7);
        expect(f.counts(id, c)).toBe(true);
        expect([c[0], c[2]]).toEqual([12, 0]);
        expect(f.totals().bytes).toBe(got.reduce((a, m) => a + m.length, 0));
      } finally {
        tx.close();
        sink.close();
      }
    });
  }

  it('a removed peer is not written; a disabled one is skipped and keeps its rollover counter; a closed socket is a drop', async () => {
    const { keys } = sessions(PROFILE_AES128_CM_HMAC_SHA1_80);
    const [tx, a, b] = [await udp(), await udp(), await udp()];
    const seen = { a: 0, b: 0 };
    a.on('message', () => seen.a++);
    b.on('message', () => seen.b++);
    const f = new RtpFanout();
    const peer = (sock: dgram.Socket, ssrc: number): RtpFanoutPeer => ({ fd: socketFd(tx)!, host: '127.0.0.1', port: sock.address().port, ssrc, payloadType: 111, ...keys });
    const ida = f.add(peer(a, 1));
    const idb = f.add(peer(b, 2));
    try {
      expect(f.send(65535, 0, Buffer.alloc(10), false)).toBe(2);
      expect(f.remove(ida)).toBe(true);
      expect(f.remove(ida)).toBe(false);
      expect(f.counts(ida, new Float64Array(7))).toBe(false);
      expect(f.size).toBe(1);
      expect(f.send(0, 960, Buffer.alloc(10), false)).toBe(1); // seq wrap: b's ROC is now 1
      f.setEnabled(idb, false);
      expect(f.send(1, 1920, Buffer.alloc(10), false)).toBe(0);
      f.setEnabled(idb, true);
      // The disabled peer's ROC followed the stream: the packet it gets next is index 2^16 + 2.
      const js = new SrtpProtector({ profile: keys.profile, key: keys.key, salt: keys.salt, auth: keys.auth! }, 2);
      expect(f.protect(idb, 2, 2880, Buffer.alloc(10), false)!.equals(jsPacket(js, 2, 111, 2, 2880, Buffer.alloc(10), false, 1))).toBe(true);
      await until(() => seen.a === 1 && seen.b === 2, 5000, 'datagrams');
      tx.close(); // the descriptor is closed now: writes fail, counted as drops
      expect(f.send(3, 3840, Buffer.alloc(10), false)).toBe(0);
      const c = new Float64Array(7);
      f.counts(idb, c);
      expect(c[2]).toBe(1);
      expect(c[3]).toBe(1);
      expect(c[4]).toBeGreaterThan(0); // errno (EBADF)
      await new Promise((r) => setTimeout(r, 50)); // A fixed wait on purpose: no datagram arrives after the close.
      expect(seen).toEqual({ a: 1, b: 2 });
    } finally {
      a.close();
      b.close();
    }
  });

  it('refuses bad keys, profiles, addresses and arguments with a TypeError', () => {
    const f = new RtpFanout();
    const ok: RtpFanoutPeer = { fd: 0, host: '127.0.0.1', port: 9, ssrc: 1, payloadType: 111, profile: 1, key: Buffer.alloc(16), salt: Buffer.alloc(14), auth: Buffer.alloc(20) };
    expect(() => f.add({ ...ok, key: Buffer.alloc(15) })).toThrow(TypeError);
    expect(() => f.add({ ...ok, auth: null })).toThrow(TypeError);
    expect(() => f.add({ ...ok, profile: 2 })).toThrow(TypeError);
    expect(() => f.add({ ...ok, host: 'example.com' })).toThrow(TypeError);
    expect(() => f.add({ ...ok, payloadType: 128 })).toThrow(TypeError);
    expect(() => f.send(65536, 0, Buffer.alloc(1), false)).toThrow(TypeError);
    expect(() => f.send(1, 0, Buffer.alloc(70_000), false)).toThrow(TypeError);
    expect(f.add({ ...ok, host: '::1', profile: 7, salt: Buffer.alloc(14), auth: null })).toBeGreaterThan(0);
  });
});

describe('FanoutGroup over a werift connection', () => {
  it('joins a connected peer on its UDP pair; werift receives the packets intact; a closed connection is no longer written', async () => {
    const pair = await connectWeriftPair();
    const { server, transceiver, close } = pair;
    try {
      const counters = { packetsSent: 0, payloadBytesSent: 0, packetsDropped: 0, peersDroppedSlow: 0 };
      let emptied = 0;
      const closed: string[] = [];
      const group = new FanoutGroup(new RtpFanout(), counters, () => emptied++);
      const session: FanoutSession = { connected: () => server.connectionState === 'connected', close: (r) => closed.push(r), demote: () => closed.push('demoted') };
      const w = weriftMediaState(transceiver)!;
      const id = group.join(session, w);
      expect(id).not.toBeNull();
      await sendAcrossWrap(pair, (seq, ts, payload, marker) => group.send(seq, ts, payload, marker), expect);
      expect(counters).toEqual({ packetsSent: WRAP_PAYLOADS.length, payloadBytesSent: WRAP_PAYLOADS.reduce((n, p) => n + p.length, 0), packetsDropped: 0, peersDroppedSlow: 0 });

      // werift closes the connection and its sockets: the peer leaves the fan-out, nothing more is written.
      await server.close();
      await until(() => emptied === 1, 5000, 'the group emptied');
      expect(closed).toEqual(['socket closed']);
      group.send(20, 0, Buffer.alloc(10), false);
      expect(counters.packetsSent).toBe(WRAP_PAYLOADS.length);
    } finally {
      await close();
    }
  }, 30_000);
});

describe('FanoutGroup state mirror', () => {
  it('follows consent, the connection state and the nominated pair; demotes with the packet index; closes a peer dropping for 5 s', async () => {
    const { keys } = sessions(PROFILE_AES128_CM_HMAC_SHA1_80);
    const [tx, tx2, rx] = [await udp(), await udp(), await udp()];
    let consent = true;
    let connected = true;
    const pair = { protocol: { type: 'stun', transport: { socket: tx, closed: false } }, remoteAddr: ['127.0.0.1', rx.address().port] as const };
    const ice = { nominated: pair, canSendApplicationData: () => consent, send: async () => {} } as unknown as IceAgent;
    const counters = { packetsSent: 0, payloadBytesSent: 0, packetsDropped: 0, peersDroppedSlow: 0 };
    const events: string[] = [];
    let demotedAt: SrtpIndex | null = null;
    const session: FanoutSession = { connected: () => connected, close: (r) => events.push(r), demote: (from) => { demotedAt = from; } };
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval', 'Date'] });
    try {
      const group = new FanoutGroup(new RtpFanout(), counters, () => events.push('empty'));
      const id = group.join(session, { ice, ctx: { profile: keys.profile, srtpSessionKey: keys.key, srtpSessionSalt: keys.salt, srtpSessionAuthTag: keys.auth! }, ssrc: 5, payloadType: 111 })!;
      expect(id).toBeGreaterThan(0);
      group.send(65535, 0, Buffer.alloc(20), false);
      expect(counters.packetsSent).toBe(1);
      consent = false; // seen at the next check
      vi.advanceTimersByTime(CHECK_MS);
      group.send(0, 960, Buffer.alloc(20), false);
      expect(counters).toEqual({ packetsSent: 1, payloadBytesSent: 20, packetsDropped: 0, peersDroppedSlow: 0 });
      consent = true;
      connected = false; // a state event calls update() at once
      group.update(id);
      group.send(1, 1920, Buffer.alloc(20), false);
      expect(counters.packetsSent).toBe(1);
      connected = true;
      group.update(id);
      // The pair moves to another UDP socket: retargeted, still sent.
      pair.protocol.transport.socket = tx2;
      vi.advanceTimersByTime(CHECK_MS);
      group.send(2, 2880, Buffer.alloc(20), false);
      expect(counters.packetsSent).toBe(2);
      // Drops for 5 s (the socket closed under it without a close event reaching the group): too slow.
      tx2.removeAllListeners('close');
      tx2.close();
      for (let t = 0; t <= PEER_MAX_DROPPING_MS + CHECK_MS; t += CHECK_MS) {
        group.send(3, 3840, Buffer.alloc(20), false);
        vi.advanceTimersByTime(CHECK_MS);
      }
      expect(counters.peersDroppedSlow).toBe(1);
      expect(events).toContain('too slow');
      group.leave(id);
      expect(events).toContain('empty');

      // A second peer whose pair becomes a TURN relay leaves for the JS sender with its index.
      const pair2 = { protocol: { type: 'stun', transport: { socket: tx, closed: false } }, remoteAddr: ['127.0.0.1', rx.address().port] as const };
      const ice2 = { nominated: pair2, canSendApplicationData: () => true, send: async () => {} } as unknown as IceAgent;
      const g2 = new FanoutGroup(new RtpFanout(), counters, () => events.push('empty2'));
      g2.join(session, { ice: ice2, ctx: { profile: keys.profile, srtpSessionKey: keys.key, srtpSessionSalt: keys.salt, srtpSessionAuthTag: keys.auth! }, ssrc: 6, payloadType: 111 });
      g2.send(65535, 0, Buffer.alloc(20), false);
      g2.send(0, 960, Buffer.alloc(20), false);
      pair2.protocol.type = 'relay';
      vi.advanceTimersByTime(CHECK_MS);
      expect(demotedAt).toEqual({ roc: 1, lastSeq: 0 });
      expect(events).toContain('empty2');
    } finally {
      vi.useRealTimers();
      tx.close();
      rx.close();
    }
  });
});
