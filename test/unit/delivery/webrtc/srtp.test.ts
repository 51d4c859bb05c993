/**
 * The fan-out's own SRTP protection (src/delivery/webrtc/srtp.ts): the AES-CM key stream against
 * RFC 3711 Appendix B.2, the JS HMAC-SHA1 against OpenSSL's, and whole packets of both profiles
 * (AES_CM_128_HMAC_SHA1_80, AEAD_AES_128_GCM) decrypted and authenticated by werift's own SRTP
 * receiver, across a sequence-number wrap (rollover counter 0 → 1, RFC 3711 §3.3.1).
 */
import { createHmac, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { SrtpSession } from 'werift';
import { HmacSha1, PROFILE_AEAD_AES_128_GCM, PROFILE_AES128_CM_HMAC_SHA1_80, SrtpProtector } from '../../../../src/delivery/webrtc/srtp.js';

const hex = (s: string) => Buffer.from(s.replace(/\s+/g, ''), 'hex');

describe('SrtpProtector', () => {
  it('AES-CM key stream matches RFC 3711 Appendix B.2', () => {
    const p = new SrtpProtector({ profile: PROFILE_AES128_CM_HMAC_SHA1_80, key: hex('2B7E151628AED2A6ABF7158809CF4F3C'), salt: hex('F0F1F2F3F4F5F6F7F8F9FAFBFCFD'), auth: Buffer.alloc(20) }, 0);
    // Zero plaintext: the ciphertext is the key stream (SSRC 0, index 0).
    const buf = Buffer.alloc(12 + 48 + 10);
    p.protect(buf, 12, 60, 0, 0);
    expect(buf.subarray(12, 60).toString('hex').toUpperCase()).toBe('E03EAD0935C95E80E166B16DD92B4EB4' + 'D23513162B02D0F72A43A2FE4A5F97AB' + '41E95B3BB0A2E8DD477901E4FCA894C0');
  });

  it('HMAC-SHA1 with the ROC appended equals OpenSSL for every length up to 300 bytes', () => {
    const key = randomBytes(20);
    const h = new HmacSha1(key);
    const out = Buffer.alloc(10);
    for (let len = 0; len <= 300; len++) {
      const msg = randomBytes(len);
      const roc = (len * 2654435761) >>> 0;
      h.tag80(msg, len, roc, out, 0);
      const r = Buffer.alloc(4);
      r.writeUInt32BE(roc);
      expect(out.equals(createHmac('sha1', key).update(msg).update(r).digest().subarray(0, 10))).toBe(true);
    }
  });

  for (const [name, profile] of [['AES_CM_128_HMAC_SHA1_80', PROFILE_AES128_CM_HMAC_SHA1_80], ['AEAD_AES_128_GCM', PROFILE_AEAD_AES_128_GCM]] as const) {
    it(`${name}: werift's SRTP receiver decrypts and authenticates the packets, across a sequence wrap`, () => {
      const saltLen = profile === PROFILE_AEAD_AES_128_GCM ? 12 : 14;
      const masterKey = randomBytes(16);
      const masterSalt = randomBytes(saltLen);
      const other = { key: randomBytes(16), salt: randomBytes(saltLen) };
      // The sender's session derives the session keys (RFC 3711 §4.3) the protector is built from.
      const tx = new SrtpSession({ profile, keys: { localMasterKey: masterKey, localMasterSalt: masterSalt, remoteMasterKey: other.key, remoteMasterSalt: other.salt } });
      const rx = new SrtpSession({ profile, keys: { localMasterKey: other.key, localMasterSalt: other.salt, remoteMasterKey: masterKey, remoteMasterSalt: masterSalt } });
      const ctx = tx.localContext;
      const ssrc = 0xdeadbeef;
      const p = new SrtpProtector({ profile, key: ctx.srtpSessionKey, salt: ctx.srtpSessionSalt, auth: ctx.srtpSessionAuthTag }, ssrc);
      let roc = 0;
      let seq = 65530;
      for (let i = 0; i < 12; i++) {
        const payload = randomBytes(8 + ((i * 97) % 400)); // ≥ 8 bytes: a ciphertext equal to the plaintext is then no 1-in-256 chance
        const len = 12 + payload.length;
        const buf = Buffer.alloc(len + p.tagLength);
        buf[0] = 0x80;
        buf[1] = 111 | (i === 0 ? 0x80 : 0);
        buf.writeUInt16BE(seq, 2);
        buf.writeUInt32BE((1000 + i * 2880) >>> 0, 4);
        buf.writeUInt32BE(ssrc, 8);
        const plain = Buffer.from(buf.subarray(0, len));
        payload.copy(plain, 12);
        payload.copy(buf, 12);
        p.protect(buf, 12, len, seq, roc);
        expect(buf.subarray(12, len).equals(payload)).toBe(false);
        const dec = rx.decrypt(buf);
        expect(dec.subarray(0, len).equals(plain)).toBe(true);
        seq = (seq + 1) & 0xffff;
        if (seq === 0) roc++;
      }
    });
  }

  it('a tampered packet fails werift\'s authentication', () => {
    const profile = PROFILE_AES128_CM_HMAC_SHA1_80;
    const k = randomBytes(16), s = randomBytes(14);
    const tx = new SrtpSession({ profile, keys: { localMasterKey: k, localMasterSalt: s, remoteMasterKey: k, remoteMasterSalt: s } });
    const ctx = tx.localContext;
    const p = new SrtpProtector({ profile, key: ctx.srtpSessionKey, salt: ctx.srtpSessionSalt, auth: ctx.srtpSessionAuthTag }, 1);
    const buf = Buffer.alloc(12 + 20 + 10);
    buf[0] = 0x80;
    buf.writeUInt32BE(1, 8);
    p.protect(buf, 12, 32, 0, 0);
    buf[20]! ^= 1;
    expect(() => tx.decrypt(buf)).toThrow();
  });
});
