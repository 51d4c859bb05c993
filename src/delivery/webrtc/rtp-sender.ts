/**
 * The media path of one WebRTC peer once werift has done ICE and DTLS (docs/listeners.md "WebRTC"):
 * each packet of the stream's source becomes one SRTP packet, written straight to the UDP socket of
 * the nominated ICE candidate pair — no `RtpPacket`/`RtpHeader` objects, no promise, no timer per
 * packet.
 * - RTP (RFC 3550 §5.1): V=2, no padding/extension/CSRC, the marker and sequence number/timestamp
 *   of the source (RFC 7587 §4.1: 48 kHz clock), the payload type negotiated by werift and the
 *   sender's SSRC (the one werift put in the answer's `a=ssrc`).
 * - SRTP (RFC 3711): keyed with the session keys werift derived from its DTLS session
 *   (RFC 5764 §4.2) for this direction; the rollover counter is counted here (§3.3.1), from 0 at the
 *   first packet this sender sends.
 * - Consent (RFC 7675 §5.1): nothing is sent while werift's ICE agent has no fresh consent.
 * What stays werift's: signalling, ICE (checks, consent freshness), DTLS, SRTCP and RTCP receive.
 * werift sends no RTCP sender reports for this track (its sender never sees these packets):
 * a listener needs none to play a single audio track (RFC 3550 §6.4.1 reports are for sync/stats).
 */
import type { Socket } from 'node:dgram';
import type { RTCRtpTransceiver } from 'werift';
import { SrtpProtector, PROFILE_AES128_CM_HMAC_SHA1_80, PROFILE_AEAD_AES_128_GCM } from './srtp.js';

const RTP_HEADER = 12;

/** The parts of werift's ICE agent used here and by the native fan-out (werift 0.24 `Connection`). */
export interface IceAgent {
  nominated?: { protocol: { type: string; transport?: { socket?: Socket; closed?: boolean } }; remoteAddr: readonly [string, number] };
  canSendApplicationData(): boolean;
  /** werift's own send on the nominated pair (TURN relays, TCP). */
  send(data: Buffer): Promise<void>;
}

/** The parts of werift's SRTP context used here (werift 0.24 `rtp/srtp/context/Context`). */
export interface SrtpContextShape {
  profile: number;
  srtpSessionKey: Buffer;
  srtpSessionSalt: Buffer;
  srtpSessionAuthTag?: Buffer;
}

/** What a connected werift sender offers Skylark's own media path. */
export interface WeriftMediaState {
  ice: IceAgent;
  /** The SRTP session keys of the sending direction (RFC 3711 §4.3), profile 0x0001 or 0x0007. */
  ctx: SrtpContextShape;
  ssrc: number;
  payloadType: number;
}

/**
 * The ICE agent, SRTP session and RTP parameters of `transceiver`'s sender once werift connected
 * it; null when its connection does not have the shape relied on (no SRTP session yet, a profile
 * other than AES_CM_128_HMAC_SHA1_80 or AEAD_AES_128_GCM, no codec).
 */
export function weriftMediaState(transceiver: RTCRtpTransceiver): WeriftMediaState | null {
  const sender = transceiver.sender;
  const dtls = sender.dtlsTransport as unknown as { srtp?: { localContext?: SrtpContextShape }; iceTransport?: { connection?: IceAgent } } | undefined;
  const ctx = dtls?.srtp?.localContext;
  const ice = dtls?.iceTransport?.connection;
  const payloadType = sender.codec?.payloadType;
  if (!ctx || !ice || typeof ice.canSendApplicationData !== 'function' || typeof ice.send !== 'function' || payloadType === undefined) return null;
  if (ctx.profile !== PROFILE_AES128_CM_HMAC_SHA1_80 && ctx.profile !== PROFILE_AEAD_AES_128_GCM) return null;
  return { ice, ctx, ssrc: sender.ssrc, payloadType };
}

/** One peer's RTP/SRTP sender. Build with `RtpSender.attach` once werift reports `connected`. */
export class RtpSender {
  private roc = 0;
  private lastSeq = -1;
  /** Packets sent and bytes (SRTP) written. */
  packets = 0;
  bytes = 0;

  private constructor(
    private readonly ice: IceAgent,
    private readonly srtp: SrtpProtector,
    readonly ssrc: number,
    readonly payloadType: number,
    /** The SRTP protection profile (RFC 5764 §4.1.2 number). */
    readonly profile: number,
  ) {}

  /**
   * The sender of `transceiver`'s track, or null when werift's connection does not have the shape
   * this sender relies on (no SRTP session yet, an unknown profile, no UDP pair): the caller then
   * keeps werift's own `sendRtp`. `from`: the packet index so far (a peer leaving the native
   * fan-out), else the rollover counter starts at 0 with this sender's first packet.
   */
  static attach(transceiver: RTCRtpTransceiver, from?: { roc: number; lastSeq: number }): RtpSender | null {
    const w = weriftMediaState(transceiver);
    if (!w) return null;
    const { ice, ctx, ssrc, payloadType } = w;
    try {
      const p = new SrtpProtector({ profile: ctx.profile, key: ctx.srtpSessionKey, salt: ctx.srtpSessionSalt, auth: ctx.srtpSessionAuthTag }, ssrc);
      const s = new RtpSender(ice, p, ssrc, payloadType, ctx.profile);
      if (from) {
        s.roc = from.roc >>> 0;
        s.lastSeq = from.lastSeq;
      }
      return s;
    } catch {
      return null;
    }
  }

  /** Datagrams waiting in the socket's send queue (libuv), the peer's backlog. */
  queued(): number {
    const s = this.ice.nominated?.protocol.transport?.socket;
    return s && typeof s.getSendQueueCount === 'function' ? s.getSendQueueCount() : 0;
  }

  /**
   * Sends one packet (sequence number, 48 kHz timestamp, Opus payload shared by every peer, never
   * modified). @returns false when it could not be sent (no consent, no socket)
   */
  send(seq: number, timestamp: number, payload: Buffer, marker: boolean): boolean {
    const ice = this.ice;
    if (!ice.canSendApplicationData()) return false;
    const pair = ice.nominated!;
    const t = pair.protocol.transport;
    if (!t || t.closed) return false;
    if (this.lastSeq >= 0 && seq < this.lastSeq && this.lastSeq - seq > 0x8000) this.roc = (this.roc + 1) >>> 0;
    this.lastSeq = seq;
    const len = RTP_HEADER + payload.length;
    const buf = Buffer.allocUnsafe(len + this.srtp.tagLength);
    buf[0] = 0x80;
    buf[1] = (marker ? 0x80 : 0) | this.payloadType;
    buf.writeUInt16BE(seq, 2);
    buf.writeUInt32BE(timestamp >>> 0, 4);
    buf.writeUInt32BE(this.ssrc >>> 0, 8);
    payload.copy(buf, RTP_HEADER);
    this.srtp.protect(buf, RTP_HEADER, len, seq, this.roc);
    // A host/server-reflexive pair ('stun'): straight to its UDP socket. A relayed (TURN) or TCP
    // pair: werift's ICE agent wraps and sends it.
    if (pair.protocol.type === 'stun' && t.socket) t.socket.send(buf, pair.remoteAddr[1], pair.remoteAddr[0]);
    else ice.send(buf).catch(() => {});
    this.packets++;
    this.bytes += buf.length;
    return true;
  }
}
