/**
 * The media path of a WHIP publisher in native code (docs/behaviour.md "Go live over WHIP",
 * docs/decisions.md "WHIP receive in native code"): once werift has done ICE and DTLS, the UDP
 * socket of the nominated pair stops being read by node:dgram and is read by the native receive
 * (src/native/whip-receive.ts): SRTP opened with the keys werift derived for the publisher's
 * direction (RFC 5764 §4.2), the rollover counter estimated (RFC 3711 §3.3.1), receiver
 * statistics kept (RFC 3550 §A.3, §A.8), the Opus packets ordered by the native jitter buffer and,
 * once the hub routes the publish, pushed into the layer's segmenter without JavaScript.
 * - Every datagram that is not RTP (STUN, DTLS, SRTCP; RFC 7983 §7) is emitted on the socket as
 *   node:dgram would (`message`), so werift's ICE, DTLS and SRTCP go on as before.
 * - Receiver reports (RFC 3550 §6.4.2): one RR on the publisher's SSRC every 0.5–1.5 s from the
 *   native statistics, with LSR/DLSR from the publisher's last sender report (werift's own
 *   receiver, which sees no RTP, no longer sends its empty ones). With `rtcp` (the setting
 *   `SKYLARK_WHIP_NATIVE_RTCP`, on by default) the publisher's SRTCP is opened and the reports are
 *   written, SRTCP-protected and sent in native code with werift's SRTCP session keys and the next
 *   SRTCP index of werift's for our SSRC (given back to werift on close); SRTCP other than reports
 *   and SDES still goes to werift. Without it, through werift's SRTCP (./receiver-reports.ts).
 * - With `rtcp`, the publisher's consent checks on the nominated pair (RFC 7675 §5.1, RFC 8445 §7.3)
 *   are answered by ./stun-responder.ts before werift sees them, as for a WHEP fan-out peer, and
 *   our own consent to send (the reports) is checked by ./consent.ts in place of werift's loop; when
 *   it expires the receive fails (`onError`) and the publish ends.
 * - Closing (the session ends, or werift closes the socket) stops the native watch first; when the
 *   socket stays open, node:dgram reads it again.
 * Used when `SKYLARK_WHIP_NATIVE_RECEIVE` is on (docs/configuration.md) and the connection has the
 * expected shape (plain UDP pair, SRTP profile AES-CM or GCM); otherwise ./rtp-receive.ts.
 */
import type { RemoteInfo, Socket } from 'node:dgram';
import type { RTCRtpTransceiver } from 'werift';
import { ReceiverReports, type RtcpPath } from './receiver-reports.js';
import { WhipReceive, whipReceiveAvailable, type WhipNativeSink, type WhipReceiveCounts, type WhipRtcpOptions } from '../../native/whip-receive.js';
import { PROFILE_AES128_CM_HMAC_SHA1_80, PROFILE_AEAD_AES_128_GCM } from './srtp.js';
import type { IceAgent, SrtpContextShape } from './rtp-sender.js';
import type { SegmenterEvent } from '../../native/segmenter.js';
import { udpPath } from './fanout.js';
import { StunResponder } from './stun-responder.js';
import { takeOverConsent, type ConsentChecks, type TakenConsent } from './consent.js';

/** werift 0.24's SRTCP context of one direction (`rtp/src/srtp/context/srtcp`): session keys and per-SSRC index. */
interface SrtcpContextShape {
  profile: number;
  srtcpSessionKey: Buffer;
  srtcpSessionSalt: Buffer;
  srtcpSessionAuthTag?: Buffer;
  index(ssrc: number): number;
  setIndex(ssrc: number, index: number): void;
}

/** The parts of werift's DTLS transport used here (werift 0.24 `RTCDtlsTransport`). */
interface DtlsShape {
  srtp?: { remoteContext?: SrtpContextShape };
  srtcp?: { localContext?: SrtcpContextShape; remoteContext?: SrtcpContextShape };
  iceTransport?: { connection?: IceAgent };
  onRtcp?: RtcpPath['onRtcp'];
  sendRtcp?: RtcpPath['sendRtcp'];
}

/** node:dgram's UDP handle (its own symbol property 'state symbol'). */
interface UdpHandle {
  recvStart?(): number;
  recvStop?(): number;
}

function udpHandle(socket: Socket): UdpHandle | null {
  const o = socket as unknown as Record<symbol, { handle?: UdpHandle } | undefined>;
  const sym = Object.getOwnPropertySymbols(o).find((s) => s.description === 'state symbol');
  const h = sym ? o[sym]?.handle : undefined;
  return h && typeof h.recvStart === 'function' && typeof h.recvStop === 'function' ? h : null;
}

/**
 * werift's receiver sends its own receiver reports every 0.5–1.5 s; once the RTP bypasses it they
 * carry no report block (it saw no packet) and only cost an SRTCP packet per peer: its loop is
 * stopped (werift 0.24 `RTCRtpReceiver.rtcpRunning` / `rtcpCancel`; the loop ends on the abort).
 */
function stopWeriftReports(transceiver: RTCRtpTransceiver): void {
  const r = transceiver.receiver as unknown as { rtcpRunning?: boolean; rtcpCancel?: { abort?(): void } };
  if (typeof r.rtcpRunning !== 'boolean' || typeof r.rtcpCancel?.abort !== 'function') return;
  r.rtcpRunning = false;
  r.rtcpCancel.abort();
}

/** The native RTCP's options from werift's SRTCP contexts; null when they lack the shape relied on. */
function rtcpOptions(dtls: DtlsShape, reporterSsrc: number, host: string, port: number): { options: WhipRtcpOptions; local: SrtcpContextShape } | null {
  const local = dtls.srtcp?.localContext;
  const remote = dtls.srtcp?.remoteContext;
  if (!local || !remote || typeof local.index !== 'function' || typeof local.setIndex !== 'function') return null;
  if (!local.srtcpSessionKey || !local.srtcpSessionSalt || !remote.srtcpSessionKey || !remote.srtcpSessionSalt) return null;
  const auth = (c: SrtcpContextShape) => (c.profile === PROFILE_AES128_CM_HMAC_SHA1_80 ? (c.srtcpSessionAuthTag ?? null) : null);
  return {
    local,
    options: {
      remoteKey: remote.srtcpSessionKey, remoteSalt: remote.srtcpSessionSalt, remoteAuth: auth(remote),
      localKey: local.srtcpSessionKey, localSalt: local.srtcpSessionSalt, localAuth: auth(local),
      reporterSsrc, lastIndex: local.index(reporterSsrc) & 0x7fffffff, host, port,
    },
  };
}

/** A native receive's counters (`NativeRtpReceive.counts`). */
export type NativeReceiveCounts = WhipReceiveCounts & {
  /** Consent checks (STUN Binding requests, RFC 7675) answered by ./stun-responder.ts; 0 without `rtcp`. */
  consentAnswered: number;
  /** Our own consent checks sent (./consent.ts), and the authenticated answers to them; 0 without `rtcp`. */
  consentSent: number;
  consentFresh: number;
};

/** What a native receive closes besides itself. */
interface Extras {
  reports: ReceiverReports | null;
  responder: StunResponder | null;
  consent: TakenConsent | null;
  /** Gives werift's SRTCP context our last index back (native RTCP). */
  giveIndex: ((index: number) => void) | null;
  restoreClose: () => void;
}

/** One publisher's native receive. Build with `NativeRtpReceive.attach` once werift reports `connected`. */
export class NativeRtpReceive {
  private closed = false;
  private lastPackets = 0;

  private constructor(
    private readonly receive: WhipReceive,
    private readonly handle: UdpHandle,
    private readonly extras: Extras,
  ) {}

  /**
   * Moves the RTP of `transceiver`'s receiving direction to the native receive feeding `sink`
   * (packets of `payloadType`, clock `clockRate` Hz). Null when the addon lacks it or werift's
   * connection does not have the shape relied on: the caller then keeps ./rtp-receive.ts. `rtcp`:
   * SRTCP and the receiver reports in native code, consent checks answered by ./stun-responder.ts
   * and sent by ./consent.ts (each when werift's SRTCP contexts and ICE agent have the shape relied on).
   * @throws TypeError from the addon when the keys are refused (not expected from werift)
   */
  static attach(transceiver: RTCRtpTransceiver, payloadType: number, clockRate: number, sink: WhipNativeSink, onError: (why: string) => void, rtcp = true): NativeRtpReceive | null {
    if (!whipReceiveAvailable) return null;
    const dtls = transceiver.receiver.dtlsTransport as unknown as DtlsShape | undefined;
    const ctx = dtls?.srtp?.remoteContext;
    const ice = dtls?.iceTransport?.connection;
    if (!dtls || !ctx || !ice || typeof dtls.sendRtcp !== 'function' || !dtls.onRtcp) return null;
    if (ctx.profile !== PROFILE_AES128_CM_HMAC_SHA1_80 && ctx.profile !== PROFILE_AEAD_AES_128_GCM) return null;
    const path = udpPath(ice);
    const handle = path ? udpHandle(path.socket) : null;
    if (!path || !handle) return null;
    const socket = path.socket;
    let self: NativeRtpReceive | null = null;
    let checks: ConsentChecks | null = null;
    // node:dgram stops reading the socket (libuv then lets another watch take its descriptor): the
    // native watch reads it from here; if that cannot start, node:dgram reads it again.
    handle.recvStop!();
    const reporterSsrc = transceiver.receiver.rtcpSsrc;
    const native = rtcp ? rtcpOptions(dtls, reporterSsrc, path.host, path.port) : null;
    const options = { fd: path.fd, profile: ctx.profile, key: ctx.srtpSessionKey, salt: ctx.srtpSessionSalt, auth: ctx.srtpSessionAuthTag ?? null, payloadType, clockRate, ...sink.options, ...(native ? { rtcp: native.options } : {}) };
    const handlers = {
      datagram: (msg: Buffer, rinfo: RemoteInfo) => void (checks?.take(msg, rinfo) || socket.emit('message', msg, rinfo)),
      frames: (positions: number[], payloads: Buffer[], segmented: boolean) => sink.frames(positions, payloads, segmented),
      segmenterEvents: (events: SegmenterEvent[]) => sink.segmenterEvents(events),
      error: (why: string) => {
        self?.close();
        onError(why);
      },
    };
    let receive: WhipReceive;
    try {
      receive = new WhipReceive(options, handlers);
    } catch (e) {
      handle.recvStart!();
      throw e;
    }
    // werift closing the socket (ICE ends) must find the native watch stopped first.
    const close = socket.close;
    socket.close = function (this: Socket, ...args: unknown[]) {
      self?.close(true);
      return (close as (...a: unknown[]) => Socket).apply(this, args);
    } as Socket['close'];
    const restoreClose = () => {
      socket.close = close;
    };
    const extras: Extras = {
      reports: native ? null : new ReceiverReports(dtls as RtcpPath, reporterSsrc, () => receive.counts().ssrc ?? -1, () => receive.report()),
      responder: native ? StunResponder.forAgent(ice, path, true) : null,
      consent: native ? takeOverConsent(ice, path, () => handlers.error('ICE consent expired (RFC 7675 §5.1)')) : null,
      giveIndex: native ? (i) => native.local.setIndex(reporterSsrc, i) : null,
      restoreClose,
    };
    checks = extras.consent?.checks ?? null;
    self = new NativeRtpReceive(receive, handle, extras);
    sink.attach(receive);
    stopWeriftReports(transceiver);
    return self;
  }

  /** The native receive's counters, and the consent checks answered without werift (`rtcp`). */
  counts(): NativeReceiveCounts {
    const e = this.extras;
    return { ...this.receive.counts(), consentAnswered: e.responder?.answered ?? 0, consentSent: e.consent?.checks.sent ?? 0, consentFresh: e.consent?.checks.fresh ?? 0 };
  }

  /** RTP packets authenticated (of the Opus payload type) since the last call: for the WHIP counters. */
  takePackets(): number {
    const n = this.receive.counts().packets;
    const d = n - this.lastPackets;
    this.lastPackets = n;
    return d;
  }

  /** Stops the native receive and the reports; node:dgram reads the socket again unless it is closing. */
  close(socketClosing = false): void {
    if (this.closed) return;
    this.closed = true;
    const e = this.extras;
    e.reports?.close();
    e.responder?.remove();
    e.consent?.checks.close();
    if (!socketClosing) e.consent?.restore();
    if (e.giveIndex) {
      const c = this.receive.counts();
      if (c.reportsSent > 0) e.giveIndex(c.srtcpIndex);
    }
    this.receive.close();
    e.restoreClose();
    if (!socketClosing) {
      try {
        this.handle.recvStart!();
      } catch {
        // the socket closed meanwhile: nothing to give back
      }
    }
  }
}
