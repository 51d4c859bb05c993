/**
 * The WebRTC fan-out's native half (native/io/rtp_fanout.h, docs/listeners.md "WebRTC"): per
 * stream, one object holding every peer's UDP socket descriptor, remote address, SSRC, payload
 * type, SRTP session keys and rollover counter; `send` writes one stream packet to all of them as
 * SRTP (RFC 3550 §5.1, RFC 3711 §4.1.1/§4.2, RFC 7714 §8) with non-blocking `sendto`, in one call.
 * A write the socket refuses (full, closed) is a drop for that peer, never a throw.
 */
import { loadedAddon } from './addon.js';

/** One peer of a fan-out. Keys as RFC 3711 §4.3 derives them for the sending direction. */
export interface RtpFanoutPeer {
  /** A UDP socket descriptor this process owns (a Node dgram socket's handle fd); never closed here. */
  fd: number;
  /** The remote address of the nominated ICE pair (IPv4 or IPv6 literal) and port 1..65535. */
  host: string;
  port: number;
  ssrc: number;
  /** 0..127 */
  payloadType: number;
  /** RFC 5764 §4.1.2 profile: 0x0001 SRTP_AES128_CM_HMAC_SHA1_80 or 0x0007 SRTP_AEAD_AES_128_GCM. */
  profile: number;
  /** Session key, 16 bytes. */
  key: Uint8Array;
  /** Session salt: 14 bytes (AES-CM), ≥ 12 (GCM: the first 12 are used). */
  salt: Uint8Array;
  /** Session authentication key, 20 bytes (AES-CM); null for GCM. */
  auth: Uint8Array | null;
}

/** The addon's class (native/binding/rtp_fanout.cc). */
interface RawRtpFanout {
  add(fd: number, host: string, port: number, ssrc: number, payloadType: number, profile: number, key: Uint8Array, salt: Uint8Array, auth: Uint8Array | null): number;
  remove(id: number): boolean;
  setEnabled(id: number, enabled: boolean): boolean;
  retarget(id: number, fd: number, host: string, port: number): boolean;
  send(seq: number, timestamp: number, payload: Uint8Array, marker: boolean): number;
  protect(id: number, seq: number, timestamp: number, payload: Uint8Array, marker: boolean): Buffer | null;
  counts(id: number, out: Float64Array): boolean;
  totals(out: Float64Array): void;
  readonly size: number;
}
const Raw = (loadedAddon as { RtpFanout?: new () => RawRtpFanout }).RtpFanout;

/**
 * A peer's counters (a Float64Array of 7): `[packets, bytes, drops, dropRun, lastErrno, roc, lastSeq]`
 * (dropRun: drops since the last packet written; roc: its rollover counter, RFC 3711 §3.3.1;
 * lastSeq: the last sequence number seen, -1 before the first).
 */
export type RtpFanoutCounts = Float64Array;

/**
 * The fan-out of one stream. Every method is synchronous and O(1) but `send` (O(peers)).
 * @throws TypeError from `add` for keys of the wrong size, an unknown profile, a bad address or fd
 */
export class RtpFanout {
  private readonly raw: RawRtpFanout;
  private readonly tot = new Float64Array(3);

  constructor() {
    if (!Raw) throw new Error('the loaded addon has no RtpFanout');
    this.raw = new Raw();
  }

  /** Adds an enabled peer; its rollover counter starts at 0 with its first packet. @returns its id (≥ 1) */
  add(p: RtpFanoutPeer): number {
    return this.raw.add(p.fd, p.host, p.port, p.ssrc >>> 0, p.payloadType, p.profile, p.key, p.salt, p.auth);
  }

  /** Forgets a peer: its socket is not written again. @returns false for an unknown id */
  remove(id: number): boolean {
    return this.raw.remove(id);
  }

  /** A disabled peer is skipped by `send` (no write, no drop; its rollover counter keeps counting). */
  setEnabled(id: number, enabled: boolean): boolean {
    return this.raw.setEnabled(id, enabled);
  }

  /** Moves a peer to another socket / remote address (a new nominated pair); keys and ROC stay. */
  retarget(id: number, fd: number, host: string, port: number): boolean {
    return this.raw.retarget(id, fd, host, port);
  }

  /**
   * Writes one packet (sequence number 0..65535, 48 kHz timestamp, payload ≤ 65,479 bytes, marker)
   * to every enabled peer. @returns the packets written (enabled peers minus drops)
   * @throws TypeError on arguments out of range
   */
  send(seq: number, timestamp: number, payload: Uint8Array, marker: boolean): number {
    return this.raw.send(seq, timestamp, payload, marker);
  }

  /** The SRTP packet `send` would write to peer `id` (its ROC advanced alike), not written; null: no such peer. */
  protect(id: number, seq: number, timestamp: number, payload: Uint8Array, marker: boolean): Buffer | null {
    return this.raw.protect(id, seq, timestamp, payload, marker);
  }

  /** Fills `out` (length ≥ 7) with the peer's counters (RtpFanoutCounts). @returns false for an unknown id */
  counts(id: number, out: RtpFanoutCounts): boolean {
    return this.raw.counts(id, out);
  }

  /** Packets, bytes and drops over every peer ever added. */
  totals(): { packets: number; bytes: number; drops: number } {
    this.raw.totals(this.tot);
    return { packets: this.tot[0]!, bytes: this.tot[1]!, drops: this.tot[2]! };
  }

  /** Peers held. */
  get size(): number {
    return this.raw.size;
  }
}

/** Whether the loaded addon has the fan-out (an older build has not: callers keep their JS path). */
export const rtpFanoutAvailable = Raw !== undefined;
