/**
 * A WHIP publisher's media receive in native code (native/io/whip_receive.h, docs/behaviour.md
 * "Go live over WHIP", docs/decisions.md "WHIP receive in native code"): the publisher's UDP socket
 * is watched on Node's own loop and read with `recvmmsg`; its RTP (RFC 7983 §7, RFC 5761 §4) is
 * authenticated and decrypted (RFC 3711 AES-CM + HMAC-SHA1-80, RFC 7714 AES-GCM), its rollover
 * counter estimated (RFC 3711 §3.3.1), counted for receiver reports (RFC 3550 §A.3, §A.8) and put
 * in order by a jitter buffer with the semantics of src/live/ingest/rtp-jitter.ts; the ordered Opus
 * packets go into a routed Segmenter in C++ (no JavaScript per packet) and, when asked, to JS.
 * Datagrams that are not RTP (STUN, DTLS, SRTCP) come back to JS unchanged — unless `rtcp` is
 * given: then the publisher's SRTCP is opened natively (RFC 3711 §3.4, RFC 7714 §9; its sender
 * reports kept for LSR/DLSR, anything but reports and SDES still handed back) and receiver reports
 * (RFC 3550 §6.4.2) are sent natively every 0.5–1.5 s to the remote address.
 */
import { loadedAddon } from './addon.js';
import type { Segmenter, SegmenterEvent } from './segmenter.js';

/** The session keys and settings of one publisher's receive. */
export interface WhipReceiveOptions {
  /** A bound UDP socket descriptor the process owns; nothing else may read it while this watches it. */
  fd: number;
  /** RFC 5764 §4.1.2 profile: 0x0001 SRTP_AES128_CM_HMAC_SHA1_80 or 0x0007 SRTP_AEAD_AES_128_GCM. */
  profile: number;
  /** The remote direction's session key (16 bytes), salt (14 bytes AES-CM, ≥ 12 GCM) and auth key (20 bytes, AES-CM; null for GCM). */
  key: Uint8Array;
  salt: Uint8Array;
  auth: Uint8Array | null;
  /** The negotiated Opus payload type (0..127) and its clock rate (Hz). */
  payloadType: number;
  clockRate: number;
  /** Jitter buffer: wait for a missing packet (ms, 0..10000), longest gap filled (ms), most packets held (1..65536). */
  jitterMs: number;
  maxFillMs: number;
  maxPackets: number;
  /** Longest Opus packet taken (bytes); a longer one is counted but not handed on. */
  maxFrameBytes: number;
  /**
   * Merged reads (ms, 0..1000; 0 = off): while routed with `merge` and the segmenter's next cut is
   * further away, the socket is read every this often instead of as datagrams arrive (as the RTMP
   * server's `mergeReadsMs`, docs/decisions.md "Ingest I/O").
   */
  mergeMs?: number;
  /** RTCP in native code (absent: SRTCP comes back to JS and JS sends the receiver reports). */
  rtcp?: WhipRtcpOptions;
}

/** The SRTCP session keys of both directions (RFC 3711 §4.3, labels 3–5) and where reports go. */
export interface WhipRtcpOptions {
  /** The publisher's direction: key (16 bytes), salt (14 AES-CM, ≥ 12 GCM), auth key (20, AES-CM; null for GCM). */
  remoteKey: Uint8Array;
  remoteSalt: Uint8Array;
  remoteAuth: Uint8Array | null;
  /** Ours, the same shapes. */
  localKey: Uint8Array;
  localSalt: Uint8Array;
  localAuth: Uint8Array | null;
  /** The SSRC our reports come from, and the last SRTCP index already used for it (the next is one more; RFC 3711 §3.3.2). */
  reporterSsrc: number;
  lastIndex: number;
  /** The nominated pair's remote address. */
  host: string;
  port: number;
}

/** What the receive tells JS, batched per socket wakeup. */
export interface WhipReceiveHandlers {
  /** A datagram that is not RTP, with its sender (as node:dgram's `message` event gives them). */
  datagram(msg: Buffer, rinfo: { address: string; family: 'IPv4' | 'IPv6'; port: number; size: number }): void;
  /** Ordered Opus packets at `positions` (48 kHz samples from the first); `segmented`: the routed segmenter has them. */
  frames(positions: number[], payloads: Buffer[], segmented: boolean): void;
  /** What the routed segmenter made of the pushed packets (the layer applies them). */
  segmenterEvents(events: SegmenterEvent[]): void;
  /** The socket failed: the receive stopped. */
  error(message: string): void;
}

/** Counters (`counts`). */
export interface WhipReceiveCounts {
  packets: number;
  bytes: number;
  rejected: number;
  other: number;
  /** The current SSRC; null before the first authentic packet. */
  ssrc: number | null;
  /** ms since the last authentic RTP packet; null: none yet. */
  msSinceLastRtp: number | null;
  received: number;
  reordered: number;
  lost: number;
  late: number;
  filled: number;
  held: number;
  /** Packets (PLC frames included) pushed into the routed segmenter in C++. */
  segmented: number;
  /** Reads on a merge tick (merged reads), not as datagrams arrived. */
  mergedReads: number;
  /** SRTCP packets authenticated and taken natively (`rtcp`). */
  srtcp: number;
  /** SRTCP datagrams dropped natively: authentication failed or malformed. */
  srtcpRejected: number;
  /** Receiver reports sent natively. */
  reportsSent: number;
  /** The last SRTCP index used for them. */
  srtcpIndex: number;
}

interface RawWhipReceive {
  route(segmenter: unknown, frames: boolean, merge: boolean): void;
  counts(out: Float64Array): void;
  report(out: Float64Array): boolean;
  close(): void;
}
type RawCtor = new (
  fd: number, profile: number, key: Uint8Array, salt: Uint8Array, auth: Uint8Array | null, payloadType: number, clockRate: number,
  jitterMs: number, maxFillMs: number, maxPackets: number, maxFrameBytes: number, dispatch: (kind: number, a: unknown, b: unknown, c: unknown) => void, mergeMs: number,
  ...rtcp: unknown[]
) => RawWhipReceive;
const Raw = (loadedAddon as { WhipReceive?: RawCtor }).WhipReceive;

/** Whether the loaded addon has the native WHIP receive (an older build has not: callers keep their JS path). */
export const whipReceiveAvailable = Raw !== undefined;

/**
 * One publisher's native receive; it watches the socket from construction until `close`.
 * @throws TypeError for keys of the wrong size, an unknown profile, arguments out of range, or a socket libuv cannot watch
 */
export class WhipReceive {
  private readonly raw: RawWhipReceive;
  private readonly c = new Float64Array(18);
  private readonly r = new Float64Array(5);
  private closed = false;

  constructor(o: WhipReceiveOptions, h: WhipReceiveHandlers) {
    if (!Raw) throw new Error('the loaded addon has no WhipReceive');
    const r = o.rtcp;
    const rtcp = r ? [r.remoteKey, r.remoteSalt, r.remoteAuth, r.localKey, r.localSalt, r.localAuth, r.reporterSsrc, r.lastIndex, r.host, r.port] : [];
    this.raw = new Raw(o.fd, o.profile, o.key, o.salt, o.auth, o.payloadType, o.clockRate, o.jitterMs, o.maxFillMs, o.maxPackets, o.maxFrameBytes, (kind, a, b, c) => {
      if (this.closed) return;
      if (kind === 0) for (const [msg, address, port, family] of a as [Buffer, string, number, 'IPv4' | 'IPv6'][]) h.datagram(msg, { address, family, port, size: msg.length });
      else if (kind === 1) h.frames(a as number[], b as Buffer[], c as boolean);
      else if (kind === 2) h.segmenterEvents(a as SegmenterEvent[]);
      else if (kind === 3) h.error(a as string);
    }, o.mergeMs ?? 0, ...rtcp);
  }

  /**
   * Ordered Opus goes into `segmenter` in C++ from now on (null: to `frames` only); `frames`: JS gets
   * every packet too; `merge`: merged reads allowed (`mergeMs`).
   */
  route(segmenter: Segmenter | null, frames: boolean, merge = false): void {
    if (!this.closed) this.raw.route(segmenter, frames, merge);
  }

  counts(): WhipReceiveCounts {
    this.raw.counts(this.c);
    const c = this.c;
    return {
      packets: c[0]!, bytes: c[1]!, rejected: c[2]!, other: c[3]!, ssrc: c[4]! < 0 ? null : c[4]!, msSinceLastRtp: c[5]! < 0 ? null : c[5]!,
      received: c[6]!, reordered: c[7]!, lost: c[8]!, late: c[9]!, filled: c[10]!, held: c[11]!, segmented: c[12]!, mergedReads: c[13]!,
      srtcp: c[14]!, srtcpRejected: c[15]!, reportsSent: c[16]!, srtcpIndex: c[17]!,
    };
  }

  /** One receiver report block on the current SSRC (RFC 3550 §6.4.1; starts the next interval); null before the first packet. */
  report(): { ssrc: number; fractionLost: number; packetsLost: number; highestSequence: number; jitter: number } | null {
    if (!this.raw.report(this.r)) return null;
    const r = this.r;
    return { ssrc: r[0]!, fractionLost: r[1]!, packetsLost: r[2]!, highestSequence: r[3]!, jitter: r[4]! };
  }

  /** Stops watching the socket (idempotent); nothing is reported afterwards. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.raw.close();
  }
}

/**
 * What a publish gives the native receive (src/live/ingest/whip.ts `WhipPublish.nativeSink`): its
 * jitter buffer's settings, and where ordered packets and segmenter events go. `attach` hands it
 * the receive (to route into its layer's segmenter and read counts from).
 */
export interface WhipNativeSink {
  readonly options: { jitterMs: number; maxFillMs: number; maxPackets: number; maxFrameBytes: number; mergeMs: number };
  attach(feed: WhipNativeFeed): void;
  frames(positions: number[], payloads: Buffer[], segmented: boolean): void;
  segmenterEvents(events: SegmenterEvent[]): void;
}

/** The native receive as a publish uses it (`WhipReceive` is one). */
export interface WhipNativeFeed {
  route(segmenter: Segmenter | null, frames: boolean, merge: boolean): void;
  counts(): WhipReceiveCounts;
}
