/**
 * The media path of a WHIP publisher once werift has done ICE and DTLS (docs/behaviour.md "Go live
 * over WHIP"): each SRTP packet the publisher sends is taken straight off werift's ICE connection,
 * authenticated and decrypted in place, its RTP header read, and its payload handed on — no
 * `RtpPacket`/`RtpHeader` objects, no event chain, no promise and no copy per packet.
 * - Demultiplexing (RFC 7983 §7, RFC 5761 §4): a datagram whose first byte is 128–191 and whose
 *   second byte's low 7 bits are not 64–95 is RTP and taken here; everything else (STUN, DTLS,
 *   SRTCP) goes on to werift as before.
 * - SRTP (RFC 3711): the session keys werift derived for the publisher's direction (RFC 5764
 *   §4.2), SRTP_AES128_CM_HMAC_SHA1_80 or SRTP_AEAD_AES_128_GCM; the packet index from the
 *   rollover counter estimated as in RFC 3711 §3.3.1 (Appendix A), updated only by an authentic
 *   packet; a packet that fails authentication is dropped and counted. A new SSRC is taken once one
 *   of its packets authenticates (the publisher restarted its stream).
 * - RTP (RFC 3550 §5.1): version 2, CSRCs and a header extension skipped, padding removed; packets
 *   of another payload type than the negotiated Opus one are counted but not handed on.
 * - Receiver reports (RFC 3550 §6.4.2): one RR on the publisher's SSRC every 0.5–1.5 s (§6.2's
 *   randomisation around 1 s), with the fraction and cumulative number lost, the extended highest
 *   sequence number (§A.3), the interarrival jitter (§A.8), and LSR/DLSR from the publisher's last
 *   sender report. They go out through werift's SRTCP.
 * What stays werift's: signalling, ICE (checks, consent), DTLS, SRTCP both ways. Order, loss and
 * late packets are the jitter buffer's (src/live/ingest/rtp-jitter.ts).
 */
import type { RTCRtpTransceiver } from 'werift';
import { SrtpProtector, PROFILE_AES128_CM_HMAC_SHA1_80, PROFILE_AEAD_AES_128_GCM, tagLength } from './srtp.js';
import type { SrtpContextShape } from './rtp-sender.js';
import { ReceiverReports, type RtcpPath } from './receiver-reports.js';

/** One RTP packet handed on: 16-bit sequence number, 32-bit timestamp, payload (a view into the datagram, owned by the callee), SSRC. */
export type RtpHandler = (seq: number, timestamp: number, payload: Buffer, ssrc: number) => void;

/** The parts of werift's DTLS transport used here (werift 0.24 `RTCDtlsTransport`). */
interface DtlsShape {
  srtp?: { remoteContext?: SrtpContextShape };
  iceTransport?: { connection?: { onData?: { execute?: (data: Buffer) => void } } };
  onRtcp?: RtcpPath['onRtcp'];
  sendRtcp?: RtcpPath['sendRtcp'];
}

/**
 * Reception statistics of one SSRC for receiver reports (RFC 3550 §6.4.1): sequence numbers
 * extended over wraps (§A.1, without probation), expected and lost (§A.3), interarrival jitter in
 * RTP clock units (§A.8).
 */
export class ReceptionStats {
  received = 0;
  /** Extended sequence number of the first packet and the highest so far (-1: none yet). */
  private base = -1;
  highest = -1;
  private expectedPrior = 0;
  private receivedPrior = 0;
  private jitter = 0;
  private lastTransit: number | null = null;

  /** One packet: `seq` 16-bit, `timestamp` its 32-bit RTP timestamp, `arrival` in the same clock's units (any origin). */
  add(seq: number, timestamp: number, arrival: number): void {
    this.received++;
    if (this.highest < 0) this.base = this.highest = seq;
    else {
      let d = (seq - (this.highest & 0xffff) + 0x10000) & 0xffff;
      if (d >= 0x8000) d -= 0x10000;
      if (this.highest + d > this.highest) this.highest += d;
    }
    const transit = (Math.floor(arrival) - timestamp) | 0;
    if (this.lastTransit !== null) this.jitter += (Math.abs((transit - this.lastTransit) | 0) - this.jitter) / 16;
    this.lastTransit = transit;
  }

  /** The report block's fields now (§6.4.1); starts the next interval for `fractionLost`. */
  report(): { fractionLost: number; packetsLost: number; highestSequence: number; jitter: number } {
    const expected = this.highest < 0 ? 0 : this.highest - this.base + 1;
    const expectedInterval = expected - this.expectedPrior;
    const receivedInterval = this.received - this.receivedPrior;
    this.expectedPrior = expected;
    this.receivedPrior = this.received;
    const lostInterval = expectedInterval - receivedInterval;
    const fractionLost = expectedInterval <= 0 || lostInterval <= 0 ? 0 : Math.floor((lostInterval * 256) / expectedInterval);
    const packetsLost = Math.min(0x7fffff, Math.max(0, expected - this.received));
    return { fractionLost, packetsLost, highestSequence: Math.max(0, this.highest) >>> 0, jitter: Math.floor(this.jitter) };
  }
}

/** One publisher's SRTP receive. Build with `RtpReceive.attach` once werift reports `connected`. */
export class RtpReceive {
  /** RTP packets authenticated, and their payload bytes. */
  packets = 0;
  bytes = 0;
  /** RTP datagrams dropped: failed authentication, malformed, or too old for the rollover counter. */
  rejected = 0;
  private ssrc = -1;
  private srtp: SrtpProtector | null = null;
  /** A protector for a new SSRC, kept until one of its packets authenticates. */
  private candidate: { ssrc: number; srtp: SrtpProtector } | null = null;
  /** RFC 3711 §3.3.1: the rollover counter and the highest sequence number authenticated (-1: none). */
  private roc = 0;
  private sl = -1;
  private stats = new ReceptionStats();
  private readonly reports: ReceiverReports;
  private closed = false;
  private readonly tag: number;

  private constructor(
    private readonly ctx: SrtpContextShape,
    dtls: RtcpPath,
    private readonly payloadType: number,
    private readonly clockRate: number,
    reporterSsrc: number,
    private readonly onRtp: RtpHandler,
    private readonly restore: () => void,
  ) {
    this.tag = tagLength(ctx.profile);
    this.reports = new ReceiverReports(dtls, reporterSsrc, () => this.ssrc, () => (this.ssrc < 0 ? null : { ssrc: this.ssrc, ...this.stats.report() }));
  }

  /**
   * Takes the RTP of `transceiver`'s receiving direction off werift: packets of `payloadType`
   * (clock `clockRate` Hz) go to `onRtp`. Null when werift's connection does not have the shape
   * relied on (no SRTP session yet, another profile): the caller then keeps werift's receive path.
   */
  static attach(transceiver: RTCRtpTransceiver, payloadType: number, clockRate: number, onRtp: RtpHandler): RtpReceive | null {
    const dtls = transceiver.receiver.dtlsTransport as unknown as DtlsShape | undefined;
    const ctx = dtls?.srtp?.remoteContext;
    const event = dtls?.iceTransport?.connection?.onData;
    const original = event?.execute;
    if (!dtls || !ctx || !event || typeof original !== 'function' || typeof dtls.sendRtcp !== 'function' || !dtls.onRtcp) return null;
    if (ctx.profile !== PROFILE_AES128_CM_HMAC_SHA1_80 && ctx.profile !== PROFILE_AEAD_AES_128_GCM) return null;
    let r: RtpReceive | null = null;
    const hook = (data: Buffer) => {
      if (!r!.take(data)) original(data);
    };
    r = new RtpReceive(ctx, dtls as RtcpPath, payloadType, clockRate, transceiver.receiver.rtcpSsrc, onRtp, () => {
      if (event.execute === hook) event.execute = original;
    });
    event.execute = hook;
    return r;
  }

  /** Stops taking packets (they go to werift again) and sending reports. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.reports.close();
    this.restore();
  }

  /** One datagram from the ICE connection: false when it is not RTP (werift's then). */
  take(data: Buffer): boolean {
    if (data.length < 12 || (data[0]! & 0xc0) !== 0x80) return false;
    const pt = data[1]! & 0x7f;
    if (pt >= 64 && pt <= 95) return false;
    if (this.closed) return true;
    try {
      this.rtp(data, pt);
    } catch {
      this.rejected++;
    }
    return true;
  }

  private rtp(data: Buffer, pt: number): void {
    const b0 = data[0]!;
    let hl = 12 + 4 * (b0 & 0x0f);
    if (b0 & 0x10) hl = hl + 4 > data.length ? data.length : hl + 4 + 4 * data.readUInt16BE(hl + 2);
    if (hl + this.tag > data.length) return void this.rejected++;
    const seq = data.readUInt16BE(2);
    const timestamp = data.readUInt32BE(4);
    const ssrc = data.readUInt32BE(8);
    const known = ssrc === this.ssrc;
    let srtp = this.srtp;
    if (!known) {
      if (this.candidate?.ssrc !== ssrc) this.candidate = { ssrc, srtp: this.protector(ssrc) };
      srtp = this.candidate.srtp;
    }
    const roc = known ? this.estimateRoc(seq) : 0;
    if (roc < 0 || !srtp!.unprotect(data, hl, data.length, seq, roc)) return void this.rejected++;
    if (known) this.advance(seq, roc);
    else {
      // A new source (RFC 3550 §8.2: the publisher restarted): its own counters from here.
      this.ssrc = ssrc;
      this.srtp = srtp;
      this.candidate = null;
      this.roc = 0;
      this.sl = seq;
      this.stats = new ReceptionStats();
      this.reports.newSource();
    }
    let end = data.length - this.tag;
    if (b0 & 0x20) end -= data[end - 1]!;
    if (end <= hl) return void this.rejected++;
    this.stats.add(seq, timestamp, (performance.now() * this.clockRate) / 1000);
    if (pt !== this.payloadType) return;
    this.packets++;
    this.bytes += end - hl;
    this.onRtp(seq, timestamp, data.subarray(hl, end), ssrc);
  }

  /** RFC 3711 §3.3.1: the rollover counter `seq` most likely belongs to (-1: before the first one). */
  private estimateRoc(seq: number): number {
    const sl = this.sl;
    if (sl < 0x8000) return seq - sl > 0x8000 ? this.roc - 1 : this.roc;
    return sl - 0x8000 > seq ? this.roc + 1 : this.roc;
  }

  /** After an authentic packet: the highest index so far (RFC 3711 §3.3.1). */
  private advance(seq: number, roc: number): void {
    if (roc > this.roc) {
      this.roc = roc;
      this.sl = seq;
    } else if (roc === this.roc && seq > this.sl) this.sl = seq;
  }

  private protector(ssrc: number): SrtpProtector {
    const c = this.ctx;
    return new SrtpProtector({ profile: c.profile, key: c.srtpSessionKey, salt: c.srtpSessionSalt, auth: c.srtpSessionAuthTag }, ssrc);
  }
}
