/**
 * SRTP protection of outgoing RTP packets (RFC 3711), for the WebRTC fan-out's own sender
 * (src/delivery/webrtc/rtp-sender.ts): one `SrtpProtector` per peer, built from the SRTP session
 * keys werift derived from its DTLS session (RFC 5764 §4.2, RFC 3711 §4.3).
 *
 * Profiles (RFC 5764 §4.1.2, RFC 7714 §14.2):
 * - `SRTP_AES128_CM_HMAC_SHA1_80` (RFC 3711 §4.1.1, §4.2.1): AES-128 in counter mode, the key
 *   stream made by ONE reusable native AES-128-ECB cipher per peer over the packet's counter
 *   blocks (one native call per packet instead of a cipher object per packet); the 80-bit
 *   HMAC-SHA1 tag computed in JS from precomputed inner/outer SHA-1 states (RFC 2104 §2: the key
 *   is fixed per session, so only the message blocks are hashed per packet).
 * - `SRTP_AEAD_AES_128_GCM` (RFC 7714 §8, §9.1): OpenSSL's AES-128-GCM, one cipher per packet.
 *
 * The same object also checks and decrypts received SRTP packets of one SSRC in place (`unprotect`,
 * RFC 3711 §3.3: authenticate first, then decrypt), for a WHIP publisher's media path
 * (src/delivery/webrtc/rtp-receive.ts). SRTCP stays werift's.
 */
import { createCipheriv, createDecipheriv, type Cipher } from 'node:crypto';

/** RFC 5764 §4.1.2 protection profile numbers (as werift names them). */
export const PROFILE_AES128_CM_HMAC_SHA1_80 = 0x0001;
export const PROFILE_AEAD_AES_128_GCM = 0x0007;

/** The session keys of one direction (RFC 3711 §4.3: k_e, k_s, k_a). */
export interface SrtpSessionKeys {
  profile: number;
  /** Session encryption key, 16 bytes. */
  key: Buffer;
  /** Session salt: 14 bytes (AES-CM) or 12 bytes (GCM; only the first 12 of a longer one are used). */
  salt: Buffer;
  /** Session authentication key, 20 bytes (AES-CM only). */
  auth?: Buffer;
}

/** Bytes an SRTP packet adds after the RTP packet (the authentication tag). */
export function tagLength(profile: number): number {
  return profile === PROFILE_AEAD_AES_128_GCM ? 16 : 10;
}

/**
 * Protects RTP packets of one SSRC in place: `protect(buf, headerLen, len, roc)` encrypts
 * `buf[headerLen, len)` and writes the tag at `buf[len, len + tagLength)`; `unprotect` checks and
 * decrypts a received packet of that SSRC (keys of the other direction) in place.
 * @throws Error for an unknown profile or keys of the wrong size
 */
export class SrtpProtector {
  readonly tagLength: number;
  private readonly ecb: Cipher | null = null;
  /** AES-CM: the IV's fixed part (salt XOR SSRC), 16 bytes; GCM: the 12-byte salt. */
  private readonly base: Buffer;
  private counters = Buffer.alloc(0);
  private readonly sha: HmacSha1 | null = null;
  private readonly gcmIv = Buffer.alloc(12);
  private readonly expected = Buffer.alloc(10);

  constructor(private readonly keys: SrtpSessionKeys, ssrc: number) {
    this.tagLength = tagLength(keys.profile);
    if (keys.key.length !== 16) throw new Error('SRTP: the session key must be 16 bytes (AES-128)');
    if (keys.profile === PROFILE_AES128_CM_HMAC_SHA1_80) {
      if (keys.salt.length !== 14 || keys.auth?.length !== 20) throw new Error('SRTP: AES-CM needs a 14-byte salt and a 20-byte auth key');
      this.ecb = createCipheriv('aes-128-ecb', keys.key, null);
      this.ecb.setAutoPadding(false);
      this.base = Buffer.alloc(16);
      keys.salt.copy(this.base, 0);
      this.base.writeUInt32BE((this.base.readUInt32BE(4) ^ ssrc) >>> 0, 4);
      this.sha = new HmacSha1(keys.auth);
    } else if (keys.profile === PROFILE_AEAD_AES_128_GCM) {
      // RFC 7714 §12: a 96-bit session salt (a KDF giving 112 bits, as werift's does, is cut to 96).
      if (keys.salt.length < 12) throw new Error('SRTP: AES-GCM needs a 12-byte salt');
      this.base = Buffer.from(keys.salt.subarray(0, 12));
      this.base.writeUInt32BE((this.base.readUInt32BE(2) ^ ssrc) >>> 0, 2);
    } else throw new Error(`SRTP: unsupported protection profile ${keys.profile}`);
  }

  /**
   * Encrypts the payload `buf[headerLen, len)` in place and appends the tag; `buf` must have
   * `len + tagLength` bytes. `seq` is the packet's RTP sequence number, `roc` the rollover counter
   * (RFC 3711 §3.3.1: packet index = roc·2^16 + seq).
   */
  protect(buf: Buffer, headerLen: number, len: number, seq: number, roc: number): void {
    if (this.ecb) {
      this.ctr(buf, headerLen, len, seq, roc);
      this.sha!.tag80(buf, len, roc, buf, len);
    } else this.gcm(buf, headerLen, len, seq, roc);
  }

  /**
   * Checks and decrypts a received SRTP packet `buf[0, len)` (RTP header of `headerLen` bytes,
   * payload, tag) in place: true when its tag is right (RFC 3711 §4.2 / RFC 7714 §8.2; then the
   * payload `buf[headerLen, len - tagLength)` is plain), false when it is not (the packet must be
   * dropped; `buf` is then unchanged for AES-CM, unspecified for GCM). `seq` and `roc` as for `protect`.
   */
  unprotect(buf: Buffer, headerLen: number, len: number, seq: number, roc: number): boolean {
    const end = len - this.tagLength;
    if (end < headerLen) return false;
    if (!this.ecb) return this.gcmOpen(buf, headerLen, end, seq, roc);
    const x = this.expected;
    this.sha!.tag80(buf, end, roc, x, 0);
    let diff = 0;
    for (let i = 0; i < 10; i++) diff |= x[i]! ^ buf[end + i]!;
    if (diff !== 0) return false;
    this.ctr(buf, headerLen, end, seq, roc);
    return true;
  }

  /** AES-CM key stream (RFC 3711 §4.1.1): IV = (k_s·2^16) XOR (SSRC·2^64) XOR (i·2^16), block j in the last 16 bits. */
  private ctr(buf: Buffer, from: number, to: number, seq: number, roc: number): void {
    const n = to - from;
    const blocks = (n + 15) >>> 4;
    if (this.counters.length < blocks * 16) {
      this.counters = Buffer.alloc(Math.max(blocks, 16) * 16);
      for (let b = 0; b < this.counters.length; b += 16) this.base.copy(this.counters, b, 0, 8);
    }
    const c = this.counters;
    const hi = (this.base.readUInt32BE(8) ^ roc) >>> 0;
    const lo = (this.base[12]! << 8 | this.base[13]!) ^ seq;
    for (let b = 0, o = 0; b < blocks; b++, o += 16) {
      c.writeUInt32BE(hi, o + 8);
      c[o + 12] = lo >>> 8;
      c[o + 13] = lo & 0xff;
      c[o + 14] = b >>> 8;
      c[o + 15] = b & 0xff;
    }
    const ks = this.ecb!.update(c.subarray(0, blocks * 16));
    for (let i = 0; i < n; i++) buf[from + i]! ^= ks[i]!;
  }

  /** AEAD_AES_128_GCM (RFC 7714 §8.1): IV = salt XOR (00 00 ‖ SSRC ‖ ROC ‖ SEQ); AAD = the RTP header. */
  private gcm(buf: Buffer, headerLen: number, len: number, seq: number, roc: number): void {
    const iv = this.gcmIv;
    this.base.copy(iv);
    iv.writeUInt32BE((iv.readUInt32BE(6) ^ roc) >>> 0, 6);
    iv.writeUInt16BE(iv.readUInt16BE(10) ^ seq, 10);
    const c = createCipheriv('aes-128-gcm', this.keys.key, iv);
    c.setAAD(buf.subarray(0, headerLen));
    const enc = c.update(buf.subarray(headerLen, len));
    c.final();
    enc.copy(buf, headerLen);
    c.getAuthTag().copy(buf, len);
  }

  /** AEAD_AES_128_GCM decryption (RFC 7714 §8.2) of `buf[headerLen, end)`, the tag after it; false: not authentic. */
  private gcmOpen(buf: Buffer, headerLen: number, end: number, seq: number, roc: number): boolean {
    const iv = this.gcmIv;
    this.base.copy(iv);
    iv.writeUInt32BE((iv.readUInt32BE(6) ^ roc) >>> 0, 6);
    iv.writeUInt16BE(iv.readUInt16BE(10) ^ seq, 10);
    const d = createDecipheriv('aes-128-gcm', this.keys.key, iv);
    d.setAAD(buf.subarray(0, headerLen));
    d.setAuthTag(buf.subarray(end, end + 16));
    const plain = d.update(buf.subarray(headerLen, end));
    try {
      d.final();
    } catch {
      return false;
    }
    plain.copy(buf, headerLen);
    return true;
  }
}

/** SHA-1 initial state (FIPS 180-4 §5.3.1). */
const SHA1_IV = [0x67452301, 0xefcdab89 | 0, 0x98badcfe | 0, 0x10325476, 0xc3d2e1f0 | 0];

/**
 * HMAC-SHA1 (RFC 2104) with a fixed key: the inner and outer states after the padded key block are
 * computed once; `tag80` hashes the message blocks and the 4-byte ROC (RFC 3711 §4.2: M = packet ‖ ROC).
 */
export class HmacSha1 {
  private readonly inner = new Int32Array(5);
  private readonly outer = new Int32Array(5);
  private readonly st = new Int32Array(5);
  private readonly w = new Int32Array(80);
  private readonly tail = Buffer.alloc(128);
  private readonly block = Buffer.alloc(64);

  /** @param key at most 64 bytes (an SRTP auth key is 20) */
  constructor(key: Buffer) {
    if (key.length > 64) throw new Error('HmacSha1: key longer than one block');
    const pad = Buffer.alloc(64);
    for (const [state, byte] of [[this.inner, 0x36], [this.outer, 0x5c]] as const) {
      pad.fill(byte);
      for (let i = 0; i < key.length; i++) pad[i]! ^= key[i]!;
      state.set(SHA1_IV);
      this.compress(state, pad, 0);
    }
  }

  /** Writes the first 10 bytes of HMAC-SHA1(key, msg[0, len) ‖ roc as 32 bits BE) to `out[at, at + 10)`. */
  tag80(msg: Buffer, len: number, roc: number, out: Buffer, at: number): void {
    const st = this.st;
    st.set(this.inner);
    let o = 0;
    for (; o + 64 <= len; o += 64) this.compress(st, msg, o);
    const t = this.tail;
    let r = len - o;
    msg.copy(t, 0, o, len);
    t.writeUInt32BE(roc >>> 0, r);
    r += 4;
    t[r++] = 0x80;
    const end = r + 8 <= 64 ? 64 : 128;
    t.fill(0, r, end - 4);
    t.writeUInt32BE(((64 + len + 4) * 8) >>> 0, end - 4); // messages stay far below 2^29 bytes
    this.compress(st, t, 0);
    if (end === 128) this.compress(st, t, 64);
    const b = this.block;
    for (let i = 0; i < 5; i++) b.writeInt32BE(st[i]!, 4 * i);
    b[20] = 0x80;
    b.fill(0, 21, 60);
    b.writeUInt32BE((64 + 20) * 8, 60);
    st.set(this.outer);
    this.compress(st, b, 0);
    out.writeInt32BE(st[0]!, at);
    out.writeInt32BE(st[1]!, at + 4);
    out.writeUInt16BE(st[2]! >>> 16, at + 8);
  }

  /** One SHA-1 compression of `b[o, o + 64)` into `st` (FIPS 180-4 §6.1.2). */
  private compress(st: Int32Array, b: Buffer, o: number): void {
    const w = this.w;
    for (let i = 0; i < 16; i++, o += 4) w[i] = (b[o]! << 24) | (b[o + 1]! << 16) | (b[o + 2]! << 8) | b[o + 3]!;
    for (let i = 16; i < 80; i++) {
      const x = w[i - 3]! ^ w[i - 8]! ^ w[i - 14]! ^ w[i - 16]!;
      w[i] = (x << 1) | (x >>> 31);
    }
    let a = st[0]!, bb = st[1]!, c = st[2]!, d = st[3]!, e = st[4]!;
    for (let i = 0; i < 80; i++) {
      let f: number;
      if (i < 20) f = ((bb & c) | (~bb & d)) + 0x5a827999;
      else if (i < 40) f = (bb ^ c ^ d) + 0x6ed9eba1;
      else if (i < 60) f = ((bb & c) | (bb & d) | (c & d)) + (0x8f1bbcdc | 0);
      else f = (bb ^ c ^ d) + (0xca62c1d6 | 0);
      const t = (((a << 5) | (a >>> 27)) + f + e + w[i]!) | 0;
      e = d;
      d = c;
      c = (bb << 30) | (bb >>> 2);
      bb = a;
      a = t;
    }
    st[0] = (st[0]! + a) | 0;
    st[1] = (st[1]! + bb) | 0;
    st[2] = (st[2]! + c) | 0;
    st[3] = (st[3]! + d) | 0;
    st[4] = (st[4]! + e) | 0;
  }
}
