/**
 * A WHIP publisher's own SRTP receive (src/delivery/webrtc/srtp.ts `unprotect`,
 * src/delivery/webrtc/rtp-receive.ts `ReceptionStats`): packets werift's SRTP sender protected
 * (both profiles, across a sequence wrap, with CSRCs, a header extension and padding) come back
 * plain; a tampered one is refused and left as it was; the receiver-report fields follow
 * RFC 3550 §A.3 (lost, extended highest sequence, fraction lost per interval).
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { RtpHeader, SrtpSession } from 'werift';
import { PROFILE_AEAD_AES_128_GCM, PROFILE_AES128_CM_HMAC_SHA1_80, SrtpProtector } from '../../../../src/delivery/webrtc/srtp.js';
import { ReceptionStats } from '../../../../src/delivery/webrtc/rtp-receive.js';

function sessions(profile: number) {
  const saltLen = profile === PROFILE_AEAD_AES_128_GCM ? 12 : 14;
  const a = { key: randomBytes(16), salt: randomBytes(saltLen) };
  const b = { key: randomBytes(16), salt: randomBytes(saltLen) };
  const tx = new SrtpSession({ profile, keys: { localMasterKey: a.key, localMasterSalt: a.salt, remoteMasterKey: b.key, remoteMasterSalt: b.salt } });
  // The receiver's remote context holds the sender's session keys (RFC 3711 §4.3).
  const rx = new SrtpSession({ profile, keys: { localMasterKey: b.key, localMasterSalt: b.salt, remoteMasterKey: a.key, remoteMasterSalt: a.salt } });
  const c = rx.remoteContext;
  return { tx, keys: { profile, key: c.srtpSessionKey, salt: c.srtpSessionSalt, auth: c.srtpSessionAuthTag } };
}

describe('SrtpProtector.unprotect', () => {
  for (const [name, profile] of [['AES_CM_128_HMAC_SHA1_80', PROFILE_AES128_CM_HMAC_SHA1_80], ['AEAD_AES_128_GCM', PROFILE_AEAD_AES_128_GCM]] as const) {
    it(`${name}: decrypts what werift's SRTP sender protected, across a sequence wrap`, () => {
      const { tx, keys } = sessions(profile);
      const ssrc = 0x12345678;
      const p = new SrtpProtector(keys, ssrc);
      let roc = 0;
      let seq = 65531;
      for (let i = 0; i < 10; i++) {
        const payload = randomBytes(1 + ((i * 131) % 300));
        const header = new RtpHeader({ sequenceNumber: seq, timestamp: (960 * i) >>> 0, payloadType: 111, ssrc, marker: i === 0 });
        const srtp = Buffer.from(tx.encrypt(payload, header));
        expect(p.unprotect(srtp, 12, srtp.length, seq, roc)).toBe(true);
        expect(srtp.subarray(12, srtp.length - p.tagLength).equals(payload)).toBe(true);
        seq = (seq + 1) & 0xffff;
        if (seq === 0) roc++;
      }
    });

    it(`${name}: a tampered packet or a wrong rollover counter is refused`, () => {
      const { tx, keys } = sessions(profile);
      const p = new SrtpProtector(keys, 7);
      const srtp = Buffer.from(tx.encrypt(randomBytes(80), new RtpHeader({ sequenceNumber: 5, timestamp: 1, payloadType: 111, ssrc: 7 })));
      const bad = Buffer.from(srtp);
      bad[40]! ^= 1;
      const before = Buffer.from(bad);
      expect(p.unprotect(bad, 12, bad.length, 5, 0)).toBe(false);
      if (profile === PROFILE_AES128_CM_HMAC_SHA1_80) expect(bad.equals(before)).toBe(true);
      expect(p.unprotect(Buffer.from(srtp), 12, srtp.length, 5, 1)).toBe(false);
      expect(p.unprotect(srtp.subarray(0, 14), 12, 14, 5, 0)).toBe(false);
    });
  }
});

describe('ReceptionStats (RFC 3550 §A.3, §A.8)', () => {
  it('counts the lost, the extended highest sequence number over a wrap, and the fraction lost per interval', () => {
    const s = new ReceptionStats();
    let t = 0;
    const seqs: number[] = [];
    for (let n = 65530; n < 65530 + 20; n++) if (n !== 65533 && n !== 65538) seqs.push(n & 0xffff);
    for (const q of seqs) s.add(q, (t += 960), t);
    const r = s.report();
    expect(r.highestSequence).toBe(65530 + 19);
    expect(r.packetsLost).toBe(2);
    expect(r.fractionLost).toBe(Math.floor((2 * 256) / 20));
    expect(r.jitter).toBe(0);
    // Next interval: 10 more, none lost; a late duplicate does not lower the highest.
    for (let n = 65550; n < 65560; n++) s.add(n & 0xffff, (t += 960), t);
    s.add(65545 & 0xffff, 0, t);
    const r2 = s.report();
    expect(r2.highestSequence).toBe(65559);
    expect(r2.fractionLost).toBe(0);
    expect(r2.packetsLost).toBe(1); // 30 expected, 29 distinct + 1 duplicate received
  });

  it('measures interarrival jitter in RTP clock units', () => {
    const s = new ReceptionStats();
    for (let i = 0; i < 200; i++) s.add(i, i * 960, i * 960 + (i % 2 ? 480 : 0));
    expect(s.report().jitter).toBeGreaterThan(400);
    expect(s.report().jitter).toBeLessThanOrEqual(480);
  });
});
