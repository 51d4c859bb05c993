/**
 * The RTCP receiver reports of one WHIP receive (RFC 3550 §6.4.2), sent every 0.5–1.5 s (§6.2's
 * randomised interval) over werift's SRTCP: one report block of the current source, with LSR and
 * DLSR from the publisher's last sender report (§6.4.1: the middle 32 bits of its NTP timestamp,
 * and the delay since it arrived in 1/65536 s). Nothing is sent before the first packet. Both
 * receive paths use it (./rtp-receive.ts in JavaScript, ./rtp-receive-native.ts in native code
 * when `SKYLARK_WHIP_NATIVE_RTCP` is off; when it is on, the native receive sends its own).
 */
import { RtcpReceiverInfo, RtcpRrPacket } from 'werift';

/** A report block's fields of the current source (RFC 3550 §6.4.1). */
export interface ReportBlock {
  ssrc: number;
  fractionLost: number;
  packetsLost: number;
  highestSequence: number;
  jitter: number;
}

/** An SRTCP packet as werift hands it on (a sender report carries `senderInfo`). */
export interface RtcpIn {
  type: number;
  ssrc: number;
  senderInfo?: { ntpTimestamp: bigint };
}

/** The SRTCP side of werift's DTLS transport used here (werift 0.24 `RTCDtlsTransport`). */
export interface RtcpPath {
  onRtcp: { subscribe(f: (p: RtcpIn) => void): { unSubscribe(): void } };
  sendRtcp(packets: RtcpRrPacket[]): Promise<unknown>;
}

/** RTCP packet type of a sender report (RFC 3550 §6.4.1). */
const SR = 200;

/** One receive's reports; `close` stops them. */
export class ReceiverReports {
  private lastSr: { lsr: number; at: number } | null = null;
  private timer: NodeJS.Timeout | null = null;
  private readonly sub: { unSubscribe(): void };
  private closed = false;

  /**
   * @param dtls werift's transport of the publisher
   * @param reporterSsrc the SSRC the reports are sent from (the receiver's RTCP SSRC)
   * @param ssrc the current source's SSRC (-1: none yet), for matching sender reports
   * @param block the report block of the current source now (null: no packet yet)
   */
  constructor(
    private readonly dtls: RtcpPath,
    private readonly reporterSsrc: number,
    private readonly ssrc: () => number,
    private readonly block: () => ReportBlock | null,
  ) {
    this.sub = dtls.onRtcp.subscribe((p) => this.rtcp(p));
    this.schedule();
  }

  /** A new source: its sender reports start over. */
  newSource(): void {
    this.lastSr = null;
  }

  /** Stops the reports. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.sub.unSubscribe();
  }

  private rtcp(p: RtcpIn): void {
    if (p.type !== SR || !p.senderInfo || p.ssrc !== this.ssrc()) return;
    this.lastSr = { lsr: Number((p.senderInfo.ntpTimestamp >> 16n) & 0xffffffffn), at: performance.now() };
  }

  private schedule(): void {
    this.timer = setTimeout(() => {
      this.timer = null;
      if (this.closed) return;
      this.send();
      this.schedule();
    }, 500 + Math.random() * 1000);
    this.timer.unref();
  }

  private send(): void {
    const b = this.block();
    if (!b) return;
    const sr = this.lastSr;
    const dlsr = sr ? Math.min(0xffffffff, Math.floor(((performance.now() - sr.at) / 1000) * 65536)) : 0;
    const info = new RtcpReceiverInfo({ ...b, lsr: sr?.lsr ?? 0, dlsr });
    this.dtls.sendRtcp([new RtcpRrPacket({ ssrc: this.reporterSsrc, reports: [info] })]).catch(() => {});
  }
}
