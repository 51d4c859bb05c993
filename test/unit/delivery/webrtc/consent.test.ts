/**
 * The WHIP receive's own consent checks (src/delivery/webrtc/consent.ts, RFC 7675): the request
 * carries USERNAME `<their ufrag>:<our ufrag>`, our role with our tie-breaker, MESSAGE-INTEGRITY
 * under their password and a FINGERPRINT (RFC 8489 §14.5, §14.7); an answer counts only when it is
 * a Binding success response to that transaction whose MESSAGE-INTEGRITY checks under their
 * password — one from a stranger who does not know it, to another transaction, or altered, does not.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { crc32 } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { consentRequest, isConsentResponse } from '../../../../src/delivery/webrtc/consent.js';
import { bindingSuccess } from '../../../../src/delivery/webrtc/stun-responder.js';

const ice = { localUsername: 'ours', remoteUsername: 'theirs', remotePassword: 'their-password-0123456789', iceControlling: false, tieBreaker: 0x0102030405060708n };

/** The attributes of a STUN message (type → value). */
function attributes(m: Buffer): Map<number, Buffer> {
  const out = new Map<number, Buffer>();
  for (let at = 20; at + 4 <= m.length; ) {
    const len = m.readUInt16BE(at + 2);
    out.set(m.readUInt16BE(at), m.subarray(at + 4, at + 4 + len));
    at += 4 + ((len + 3) & ~3);
  }
  return out;
}

describe('consent checks', () => {
  it('the request is a Binding request with their username, our role, integrity and fingerprint', () => {
    const tx = randomBytes(12);
    const r = consentRequest(tx, ice);
    expect(r.readUInt16BE(0)).toBe(0x0001);
    expect(r.readUInt16BE(2) + 20).toBe(r.length);
    expect(r.readUInt32BE(4)).toBe(0x2112a442);
    expect(r.subarray(8, 20).equals(tx)).toBe(true);
    const a = attributes(r);
    expect(a.get(0x0006)!.toString()).toBe('theirs:ours');
    expect(a.get(0x8029)!.readBigUInt64BE(0)).toBe(ice.tieBreaker);
    expect(a.has(0x802a)).toBe(false);
    // MESSAGE-INTEGRITY: HMAC-SHA1 under their password over the message up to it, length adjusted.
    const mi = r.indexOf(Buffer.from([0x00, 0x08, 0x00, 0x14]), 20);
    const signed = Buffer.from(r.subarray(0, mi));
    signed.writeUInt16BE(mi + 24 - 20, 2);
    expect(createHmac('sha1', ice.remotePassword).update(signed).digest().equals(a.get(0x0008)!)).toBe(true);
    const fp = r.length - 8;
    expect(a.get(0x8028)!.readUInt32BE(0)).toBe((crc32(r.subarray(0, fp)) ^ 0x5354554e) >>> 0);
  });

  it('an answer counts only with the transaction and their password, unaltered', () => {
    const tx = randomBytes(12);
    const req = consentRequest(tx, ice);
    const ok = bindingSuccess(req, '127.0.0.1', 5000, ice.remotePassword);
    expect(isConsentResponse(ok, tx, ice.remotePassword)).toBe(true);
    expect(isConsentResponse(bindingSuccess(req, '127.0.0.1', 5000, 'a-stranger-guess'), tx, ice.remotePassword)).toBe(false);
    expect(isConsentResponse(ok, randomBytes(12), ice.remotePassword)).toBe(false);
    for (const i of [0, 3, 10, 25, ok.length - 30]) {
      const bad = Buffer.from(ok);
      bad[i]! ^= 0x01;
      expect(isConsentResponse(bad, tx, ice.remotePassword)).toBe(false);
    }
    expect(isConsentResponse(req, tx, ice.remotePassword)).toBe(false); // a request is not an answer
    expect(isConsentResponse(ok.subarray(0, 40), tx, ice.remotePassword)).toBe(false);
  });
});
