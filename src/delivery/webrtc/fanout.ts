/**
 * The native fan-out of one stream's WebRTC peers (docs/listeners.md "WebRTC"): every connected
 * peer whose nominated ICE pair is plain UDP (host or server-reflexive, werift's `stun` protocol)
 * is held by one native object per stream, and each stream packet is written to all of them, as
 * SRTP, by ONE call (`NativeFanout.send`: RTP header RFC 3550 §5.1, SRTP RFC 3711 / RFC 7714,
 * non-blocking `sendto`). Peers on a TURN-relayed or TCP pair, or whose werift state lacks what
 * this needs, stay on the JS sender (src/delivery/webrtc/rtp-sender.ts) or werift's.
 *
 * What the per-packet JS path checked per packet is mirrored into the native peer's enabled flag:
 * - the peer connection's state (`connected`): at once, from werift's state events;
 * - consent freshness (RFC 7675 §5.1, werift's `canSendApplicationData()`) and the nominated pair
 *   (socket, remote address): every `CHECK_MS` (1 s), so a peer whose consent expired gets at most
 *   1 s more of packets (RFC 7675 §5.1 allows sending until consent expires, 30 s after the last
 *   answered check);
 * - a socket werift closes takes the peer out of the native object on its `close` event, before the
 *   descriptor can be reused, and ends the peer.
 * - the remote's connectivity checks on the nominated pair's socket (consent freshness, RFC 7675;
 *   from any of the remote's addresses: a controlling client checks every pair it formed with the
 *   socket) are answered by a StunResponder (src/delivery/webrtc/stun-responder.ts) in front of
 *   werift, moved with the pair and removed when the peer leaves;
 * - our own consent checks (RFC 7675 §5.1) are sent by ./consent.ts in place of werift's loop, on
 *   the same pair; consent that expires closes the peer. A peer that leaves for the JS sender gets
 *   werift's loop back;
 * - the SRTCP the remote sends (receiver reports, RFC 3550 §6.4.2) is counted and dropped before
 *   werift decrypts it: nothing reads it for a peer fed natively (werift's sender never saw these
 *   packets, so a NACK has nothing to resend). A peer that leaves gives it back to werift.
 * "Too slow" (docs/listeners.md "WebRTC"): a write the socket refuses (EAGAIN, ENOBUFS) is a drop;
 * a peer whose every packet has been dropped for `PEER_MAX_DROPPING_MS` is closed, judged at each
 * check (so within 1 s of it).
 */
import type { Socket } from 'node:dgram';
import type { PacketSink } from './source.js';
import type { IceAgent, WeriftMediaState } from './rtp-sender.js';
import type { RtpFanoutPeer } from '../../native/rtp-fanout.js';
import { StunResponder } from './stun-responder.js';
import { takeOverConsent, type TakenConsent } from './consent.js';

/**
 * The port through which WHEP uses the native fan-out (implemented by src/native/rtp-fanout.ts,
 * handed over by the composition root as a factory).
 */
export interface NativeFanout {
  /** @returns the peer's id; @throws TypeError for invalid keys, address or descriptor */
  add(peer: RtpFanoutPeer): number;
  remove(id: number): boolean;
  setEnabled(id: number, enabled: boolean): boolean;
  retarget(id: number, fd: number, host: string, port: number): boolean;
  /** @returns packets written (enabled peers minus drops) */
  send(seq: number, timestamp: number, payload: Uint8Array, marker: boolean): number;
  /** `[packets, bytes, drops, dropRun, lastErrno, roc, lastSeq]` into `out` (length 7); false for an unknown id. */
  counts(id: number, out: Float64Array): boolean;
  readonly size: number;
}

/** Makes one native fan-out (one per stream with native peers). */
export type NativeFanoutFactory = () => NativeFanout;

/** How often consent, the nominated pair and drops are checked per native peer (ms). */
export const CHECK_MS = 1000;
/** A peer that has dropped every packet for this long is closed as too slow (ms). */
export const PEER_MAX_DROPPING_MS = 5000;

/** The WHEP session behind a member: closed by the group, asked about its connection state. */
export interface FanoutSession {
  /** Whether werift's peer connection is `connected`. */
  connected(): boolean;
  close(reason: string): void;
  /**
   * The nominated pair is no longer plain UDP (TURN, TCP): the session leaves for the JS sender,
   * which goes on from the peer's rollover counter and last sequence number (RFC 3711 §3.3.1).
   */
  demote(from: SrtpIndex): void;
}

/** Where a peer's SRTP packet index stands (RFC 3711 §3.3.1). */
export interface SrtpIndex {
  roc: number;
  /** -1: no packet yet. */
  lastSeq: number;
}

/** The counters WHEP keeps (WhepStats), updated in place. */
export interface FanoutCounters {
  packetsSent: number;
  /** RTP payload bytes (the Opus audio) of the packets sent, every peer counted. */
  payloadBytesSent: number;
  packetsDropped: number;
  peersDroppedSlow: number;
}

interface Member {
  id: number;
  session: FanoutSession;
  ice: IceAgent;
  socket: Socket;
  onSocketClose: () => void;
  stun: StunResponder | null;
  consent: TakenConsent | null;
  remote: string;
  enabled: boolean;
  lastPackets: number;
  droppingSince: number;
}

/** The UDP socket, its descriptor and the remote address of `ice`'s nominated pair; null when it is not plain UDP. */
export function udpPath(ice: IceAgent): { socket: Socket; fd: number; host: string; port: number } | null {
  const pair = ice.nominated;
  const t = pair?.protocol.transport;
  if (!pair || pair.protocol.type !== 'stun' || !t?.socket || t.closed) return null;
  const fd = socketFd(t.socket);
  if (fd === null) return null;
  return { socket: t.socket, fd, host: pair.remoteAddr[0], port: pair.remoteAddr[1] };
}

/** The descriptor of a bound Node dgram socket (Linux, macOS); null when it has none (closed, other platforms). */
export function socketFd(socket: Socket): number | null {
  const o = socket as unknown as Record<symbol, { handle?: { fd?: unknown } } | undefined>;
  // Node keeps the handle in an own symbol property ('state symbol'); `_handle` is its deprecated alias.
  const sym = Object.getOwnPropertySymbols(o).find((s) => s.description === 'state symbol');
  const fd = sym ? o[sym]?.handle?.fd : undefined;
  return typeof fd === 'number' && fd >= 0 ? fd : null;
}

/** One stream's native peers: a single sink of the stream's packet source. */
export class FanoutGroup implements PacketSink {
  private readonly members = new Map<number, Member>();
  private enabledCount = 0;
  private readonly counts = new Float64Array(7);
  private timer: NodeJS.Timeout | null = null;
  /** SRTCP packets from the members' remotes, dropped before werift (see the file's comment). */
  rtcpIgnored = 0;

  /** @param onEmpty called when the last member left (the owner removes the group from the source) */
  constructor(
    private readonly native: NativeFanout,
    private readonly counters: FanoutCounters,
    private readonly onEmpty: (group: FanoutGroup) => void,
  ) {}

  get size(): number {
    return this.members.size;
  }

  /** Connectivity checks answered by the members' StunResponders (not werift), members now held. */
  get stunAnswered(): number {
    let n = 0;
    for (const m of this.members.values()) n += m.stun?.answered ?? 0;
    return n;
  }

  /** Our consent checks sent to the members now held, and the authenticated answers to them. */
  get consentChecks(): { sent: number; fresh: number } {
    const out = { sent: 0, fresh: 0 };
    for (const m of this.members.values()) {
      out.sent += m.consent?.checks.sent ?? 0;
      out.fresh += m.consent?.checks.fresh ?? 0;
    }
    return out;
  }

  /**
   * Adds a connected session whose nominated pair is plain UDP.
   * @returns the member id, or null when the pair is not plain UDP or the native side refused the
   * keys (the session then keeps the JS sender)
   */
  join(session: FanoutSession, w: WeriftMediaState): number | null {
    const path = udpPath(w.ice);
    if (!path) return null;
    let id: number;
    try {
      id = this.native.add({ fd: path.fd, host: path.host, port: path.port, ssrc: w.ssrc, payloadType: w.payloadType, profile: w.ctx.profile, key: w.ctx.srtpSessionKey, salt: w.ctx.srtpSessionSalt, auth: w.ctx.srtpSessionAuthTag ?? null });
    } catch {
      return null;
    }
    const m: Member = { id, session, ice: w.ice, socket: path.socket, onSocketClose: () => this.socketClosed(m), stun: null, consent: null, remote: `${path.host}:${path.port}`, enabled: true, lastPackets: 0, droppingSince: 0 };
    this.takePair(m, path);
    path.socket.once('close', m.onSocketClose);
    this.members.set(id, m);
    this.enabledCount++;
    this.refresh(m);
    if (!this.timer) {
      this.timer = setInterval(() => this.check(), CHECK_MS);
      this.timer.unref();
    }
    return id;
  }

  /** Takes a member out (its socket is not written again); the last one out calls `onEmpty`. */
  leave(id: number): void {
    const m = this.members.get(id);
    if (!m) return;
    this.members.delete(id);
    this.native.remove(id);
    this.releasePair(m);
    m.socket.off('close', m.onSocketClose);
    if (m.enabled) this.enabledCount--;
    if (this.members.size === 0) {
      if (this.timer) clearInterval(this.timer);
      this.timer = null;
      this.onEmpty(this);
    }
  }

  /** Re-reads a member's connection state and consent now (werift's state events call this). */
  update(id: number): void {
    const m = this.members.get(id);
    if (m) this.refresh(m);
  }

  /** One stream packet to every enabled member (payload shared, never modified). */
  send(seq: number, timestamp: number, payload: Buffer, marker: boolean): void {
    if (this.enabledCount === 0) return;
    const sent = this.native.send(seq, timestamp, payload, marker);
    this.counters.packetsSent += sent;
    this.counters.payloadBytesSent += sent * payload.byteLength;
    this.counters.packetsDropped += this.enabledCount - sent;
  }

  /** The stream ended: every member's session is closed. */
  close(reason: string): void {
    for (const m of [...this.members.values()]) m.session.close(reason);
  }

  private setEnabled(m: Member, on: boolean): void {
    if (m.enabled === on) return;
    m.enabled = on;
    this.enabledCount += on ? 1 : -1;
    this.native.setEnabled(m.id, on);
  }

  private refresh(m: Member): void {
    let ok = false;
    try {
      ok = m.session.connected() && m.ice.canSendApplicationData();
    } catch {
      ok = false;
    }
    this.setEnabled(m, ok);
  }

  /** Every CHECK_MS: consent, the nominated pair, and the too-slow rule, for each member. */
  private check(): void {
    const now = Date.now();
    for (const m of [...this.members.values()]) {
      if (!this.members.has(m.id)) continue; // left while an earlier one was closed
      if (!this.followPair(m)) continue;
      this.refresh(m);
      if (!m.enabled || !this.native.counts(m.id, this.counts)) continue;
      const packets = this.counts[0]!;
      const dropRun = this.counts[3]!;
      if (dropRun > 0 && packets === m.lastPackets) {
        if (m.droppingSince === 0) m.droppingSince = now;
        else if (now - m.droppingSince >= PEER_MAX_DROPPING_MS) {
          this.counters.peersDroppedSlow++;
          m.session.close('too slow');
          continue;
        }
      } else m.droppingSince = 0;
      m.lastPackets = packets;
    }
  }

  /** Follows a change of the nominated pair: another UDP socket or remote is retargeted, anything else demoted. @returns false when the member left */
  private followPair(m: Member): boolean {
    const pair = m.ice.nominated;
    if (pair && pair.protocol.transport?.socket === m.socket && `${pair.remoteAddr[0]}:${pair.remoteAddr[1]}` === m.remote && pair.protocol.type === 'stun') return true;
    const path = udpPath(m.ice);
    if (!path || !this.native.retarget(m.id, path.fd, path.host, path.port)) {
      const index: SrtpIndex = this.native.counts(m.id, this.counts) ? { roc: this.counts[5]!, lastSeq: this.counts[6]! } : { roc: 0, lastSeq: -1 };
      // Onto the JS sender first: leaving first could empty the group and stop the stream's source.
      const consent = m.consent;
      m.session.demote(index);
      this.leave(m.id);
      consent?.restore();
      return false;
    }
    m.socket.off('close', m.onSocketClose);
    this.releasePair(m);
    this.takePair(m, path);
    m.socket = path.socket;
    m.remote = `${path.host}:${path.port}`;
    path.socket.once('close', m.onSocketClose);
    return true;
  }

  /**
   * The member's pair `path` taken from werift: its remote's checks answered (StunResponder), our
   * consent checks in place of werift's loop (expired: the peer is closed), its SRTCP dropped.
   */
  private takePair(m: Member, path: { socket: Socket; host: string; port: number }): void {
    m.stun = StunResponder.forAgent(m.ice, path, true);
    m.consent = m.stun ? takeOverConsent(m.ice, path, () => m.session.close('ICE consent expired (RFC 7675 §5.1)')) : null;
    if (m.stun) m.stun.intercept = (d, rinfo) => (m.consent?.checks.take(d, rinfo) ?? false) || this.ignoreRtcp(d);
  }

  /** The responder off the member's socket and our consent checks stopped (werift's loop is not restarted here). */
  private releasePair(m: Member): void {
    m.stun?.remove();
    m.consent?.checks.close();
    m.stun = null;
    m.consent = null;
  }

  /** True (counted) for an RTCP packet: first byte 128–191, packet type 192–223 (RFC 5761 §4, RFC 7983 §7). */
  private ignoreRtcp(d: Buffer): boolean {
    if (d.length < 8 || d[0]! < 128 || d[0]! > 191 || d[1]! < 192 || d[1]! > 223) return false;
    this.rtcpIgnored++;
    return true;
  }

  /** werift closed the member's socket: out of the native object before the descriptor can be reused. */
  private socketClosed(m: Member): void {
    if (!this.members.has(m.id)) return;
    this.leave(m.id);
    m.session.close('socket closed');
  }
}
