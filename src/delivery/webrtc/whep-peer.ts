/**
 * One WHEP session's peer (docs/behaviour.md §13, docs/listeners.md): the werift peer connection
 * of an answered offer, pending until ICE and DTLS connect, then a listener whose Opus packets go
 * out through Skylark's RTP sender, werift's own, or the stream's native fan-out; dropped when too
 * slow, disconnected too long, or never connected. The endpoint that holds the peers is
 * src/delivery/webrtc/whep.ts.
 */
import { RTCRtpCodecParameters, RtpHeader, RtpPacket, type RTCPeerConnection, type RTCRtpTransceiver } from 'werift';
import type { IceServer } from '../../base/config.js';
import { randomBase62 } from '../../base/ids.js';
import type { Session } from '../listeners/session.js';
import type { StreamHub } from '../../live/media/hub.js';
import type { StreamAudioSource, PacketSink } from './source.js';
import { RtpSender } from './rtp-sender.js';
import type { FanoutGroup, FanoutSession, SrtpIndex } from './fanout.js';
import { ConnectionWatch } from './signalling.js';

/** Packets a peer may have waiting (in its UDP socket's send queue, or in werift's send path); more are dropped for it. */
const PEER_QUEUE = 32;
/** A peer that has dropped every packet for this long is closed as too slow (ms). */
const PEER_MAX_DROPPING_MS = 5000;
/** The Opus payload type we answer with when the offer has none we can match. */
const OPUS = () => new RTCRtpCodecParameters({ mimeType: 'audio/opus', clockRate: 48000, channels: 2, payloadType: 111, parameters: 'minptime=10;useinbandfec=1' });

/** Who sent an offer: what the listener session is made of once the peer connects. */
export interface OfferClient {
  /** The client address (kept in memory while pending, for the per-address cap; never stored). */
  ip: string;
  accountId: string;
  /** The listener session key (`<token subject>:whep:<id>` or `whep:<id>`). */
  keyPrefix: string;
  userAgent: string | null;
  /** When the valid listener token for this stream the offer carried expires (ms since the epoch); null: none. */
  tokenExpiresAt: number | null;
  /** That token was minted with a publishable key (docs/behaviour.md §13). */
  tokenPublishable: boolean;
}

/**
 * The RTCPeerConnection configuration of a WHEP answer: Opus only, no header extensions, host
 * candidates on `hosts` (every interface when `allInterfaces`), and exactly `iceServers` — an
 * empty list unless configured, so no outside STUN/TURN server is contacted.
 */
export function peerConfiguration(o: { iceServers: readonly IceServer[]; allInterfaces: boolean; hosts: string[] }) {
  return {
    codecs: { audio: [OPUS()], video: [] },
    headerExtensions: { audio: [], video: [] },
    iceServers: o.iceServers.map((s) => ({ ...s })),
    // With a specific HTTP host, one UDP socket per address the answer lists (werift would add
    // one per interface address, then filtered out of the answer); a wildcard host: all of them.
    iceUseIpv4: o.allInterfaces,
    iceUseIpv6: false,
    iceAdditionalHostAddresses: o.hosts,
  };
}

/** What a peer tells the WHEP endpoint that holds it (src/delivery/webrtc/whep.ts). */
export interface PeerOwner {
  /** The endpoint's counters a peer adds to (docs/metrics.md). */
  readonly counters: { packetsSent: number; payloadBytesSent: number; packetsDropped: number; peersDroppedSlow: number };
  /** The peer did not connect within the offer timeout. */
  expired(peer: Peer): void;
  /** The pending peer connected. */
  connected(peer: Peer): void;
  /** The connected peer's media path (`rtp` null: werift's `sendRtp`). */
  mediaPath(peer: Peer, rtp: RtpSender | null): void;
  /** The peer closed; `was` the state it was in. */
  forget(peer: Peer, was: 'pending' | 'connected', reason: string): void;
}

/**
 * One WHEP session: a werift peer connection with its Opus sender. `pending` from the answer until
 * werift reports `connected` (then a listener, fed by the stream's source) or the offer timeout;
 * `closed` once ended. A pending peer holds one slot of the pending caps, given back exactly once.
 */
export class Peer implements PacketSink, FanoutSession {
  readonly id = randomBase62(24);
  state: 'pending' | 'connected' | 'closed' = 'pending';
  session: Session | null = null;
  source: StreamAudioSource | null = null;
  private sender;
  /** The media path once connected (src/delivery/webrtc/rtp-sender.ts); null: werift's `sendRtp`. */
  private rtp: RtpSender | null = null;
  /** The stream's native fan-out when this peer is in it (then the source never calls `send`). */
  group: FanoutGroup | null = null;
  fanoutId = 0;
  private inflight = 0;
  /** When the current run of drops began (0: not dropping). */
  private droppingSince = 0;
  private readonly watch: ConnectionWatch;

  constructor(
    readonly streamId: string,
    readonly hub: StreamHub,
    readonly pc: RTCPeerConnection,
    readonly transceiver: RTCRtpTransceiver,
    readonly client: OfferClient,
    private readonly owner: PeerOwner,
    offerTimeoutMs: number,
  ) {
    this.sender = transceiver.sender;
    this.watch = new ConnectionWatch(pc, offerTimeoutMs, {
      pending: () => this.state === 'pending',
      live: () => this.state === 'connected',
      expired: () => this.owner.expired(this),
      connected: () => this.owner.connected(this),
      close: (reason) => this.close(reason),
      changed: () => this.group?.update(this.fanoutId),
    });
  }

  /** FanoutSession: whether werift's connection is `connected`. */
  connected(): boolean {
    return this.pc.connectionState === 'connected';
  }

  /** Takes the JS media path: Skylark's RtpSender, else werift's `sendRtp`. @returns the sender (null: werift's) */
  useJsSender(from?: SrtpIndex): RtpSender | null {
    this.group = null;
    this.fanoutId = 0;
    return (this.rtp = RtpSender.attach(this.transceiver, from));
  }

  /** FanoutSession: the nominated pair is no longer plain UDP; the peer goes on with the JS sender from `from`. */
  demote(from: SrtpIndex): void {
    if (this.state !== 'connected') return;
    this.owner.mediaPath(this, this.useJsSender(from));
    this.source?.add(this);
  }

  send(seq: number, timestamp: number, payload: Buffer, marker: boolean): void {
    if (this.state !== 'connected' || this.pc.connectionState !== 'connected') return;
    const rtp = this.rtp;
    if ((rtp ? rtp.queued() : this.inflight) >= PEER_QUEUE) return this.dropped();
    this.droppingSince = 0;
    if (rtp) {
      if (rtp.send(seq, timestamp, payload, marker)) {
        this.owner.counters.packetsSent++;
        this.owner.counters.payloadBytesSent += payload.byteLength;
      }
      return;
    }
    this.inflight++;
    this.owner.counters.packetsSent++;
    this.owner.counters.payloadBytesSent += payload.byteLength;
    // werift's sender rewrites ssrc/payload type/extensions in place: one packet object per peer.
    const pkt = new RtpPacket(new RtpHeader({ sequenceNumber: seq, timestamp, marker, payloadType: 111 }), payload);
    this.sender.sendRtp(pkt).then(this.done, this.done);
  }

  /** A packet dropped for a full queue; a peer that has dropped everything for PEER_MAX_DROPPING_MS is closed. */
  private dropped(): void {
    this.owner.counters.packetsDropped++;
    const now = Date.now();
    if (this.droppingSince === 0) this.droppingSince = now;
    else if (now - this.droppingSince >= PEER_MAX_DROPPING_MS) {
      this.owner.counters.peersDroppedSlow++;
      this.close('too slow');
    }
  }

  private readonly done = () => {
    this.inflight--;
  };

  /** Ends the session: gives back its pending slot or leaves the registry and the source, closes the connection. */
  close(reason: string): void {
    if (this.state === 'closed') return;
    const was = this.state;
    this.state = 'closed';
    this.watch.stop();
    this.group?.leave(this.fanoutId);
    this.source?.remove(this);
    this.owner.forget(this, was, reason);
    this.pc.close().catch(() => {});
  }
}
