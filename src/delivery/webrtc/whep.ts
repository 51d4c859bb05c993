/**
 * WHEP (RFC 9725) playback over WebRTC, the only home of werift:
 * - `POST /whep/<stream_id>` with an SDP offer (`Content-Type: application/sdp`) → `201 Created`,
 *   the SDP answer (all candidates included: no trickle needed), `Location: /whep/<stream_id>/<session>`
 *   and `ETag` (RFC 9725 §4.2). The answer sends one Opus track (RFC 7587) from the stream's shared
 *   packet source (src/delivery/webrtc/source.ts).
 * - `DELETE` on the session URL ends it (§4.3); `PATCH` (trickle ICE / ICE restart, §4.4) is not
 *   implemented and answers 405; `OPTIONS` answers the CORS preflight of browsers (§4.7).
 * - Token streams need the listener token as `Authorization: Bearer <token>` (§4.6) or `?token=`
 *   (401 without a valid one).
 * - An answered offer is *pending* until its peer connects (ICE + DTLS, werift's connectionState
 *   `connected`): only then is it a listener (`protocol: "webrtc"`, `listener.joined`) and fed
 *   packets (the stream's codec process starts with the first connected peer). Pending offers are
 *   capped per client address and in total (`whepMaxPendingPerIp`, `whepMaxPending`: beyond → 429
 *   `too_many_pending_offers` with `Retry-After`) and dropped, every socket closed, after
 *   `whepOfferTimeoutMs` (docs/behaviour.md §13).
 * ICE: host candidates on 127.0.0.1 and the configured HTTP host (all interfaces when that is a
 * wildcard), UDP, IPv4: one UDP socket per advertised address. ICE and DTLS by werift; a connected
 * peer's RTP/SRTP is sent by src/delivery/webrtc/rtp-sender.ts (werift's own sender when it cannot
 * attach: counted as `werift` in the stats). No STUN or
 * TURN server is contacted unless `SKYLARK_ICE_SERVERS` names some (werift's own default is a
 * public STUN server: `peerConfiguration` always passes the list). Each session's peer, its
 * media path and its timers: src/delivery/webrtc/whep-peer.ts.
 * - Sessions that stop qualifying end within a few seconds (docs/listeners.md "Connections that
 *   stop qualifying"): the stream was deleted, or it now needs a listener token the session did
 *   not bring, or whose time ran out.
 */
import { RTCPeerConnection, type RTCRtpTransceiver } from 'werift';
import type { BlockList } from 'node:net';
import type { HttpServer, RawBodyRequest, RawReply } from '../../base/http/server.js';
import { ApiError } from '../../base/errors/errors.js';
import type { Config, PublicUrls } from '../../base/config.js';
import type { Logger } from '../../base/logger.js';
import { tokenAdmitted, type ListenerTokens } from '../../base/auth/listener-tokens.js';
import type { ListenerRegistry } from '../listeners/registry.js';
import { MAX_LISTENERS, TooManyListenersError } from '../listeners/session.js';
import { PerAddressCounter, type Limits } from '../../base/limits/limits.js';
import type { StreamHub } from '../../live/media/hub.js';
import type { MediaRegistry } from '../../live/media/registry.js';
import { PUBLISHABLE_REFUSED, type HlsListenerAccess } from '../listeners/hls-access.js';
import { clientAddress } from '../../base/http/client-address.js';
import { countryOf } from '../../base/geo.js';
import { StreamAudioSource } from './source.js';
import { weriftMediaState, type RtpSender } from './rtp-sender.js';
import { FanoutGroup, type NativeFanoutFactory } from './fanout.js';
import { Peer, peerConfiguration, type OfferClient, type PeerOwner } from './whep-peer.js';
import { advertisedCandidatesOnly, advertisedHosts, answerOffer, guardedSignalling, refusePending, SIGNALLING_CORS as CORS } from './signalling.js';

/** Largest SDP offer accepted (bytes). */
const MAX_OFFER_BYTES = 64 * 1024;
/** How often sessions are checked against their stream's playback rule (ms). */
export const QUALIFY_SWEEP_MS = 1000;

export interface WhepDeps {
  http: HttpServer;
  media: MediaRegistry;
  registry: ListenerRegistry;
  tokens: ListenerTokens;
  access: HlsListenerAccess;
  trusted: BlockList;
  config: Config;
  log: Logger;
  urls: () => PublicUrls;
  /** Counts and logs the caps hit (pending offers, offer timeouts). */
  limits: Limits;
  /** Makes the native fan-out of a stream (src/delivery/webrtc/fanout.ts); null: every peer on the JS sender. */
  fanout?: NativeFanoutFactory | null;
}

/** Counters of the WebRTC side (bench, logs). */
export interface WhepStats {
  /** Sessions open, pending ones included. */
  peers: number;
  /** Answered offers whose peer has not connected yet. */
  pending: number;
  packetsSent: number;
  /** RTP payload bytes (the Opus audio) of the packets sent, every peer counted (docs/metrics.md `skylark_bytes_sent_total`). */
  payloadBytesSent: number;
  packetsDropped: number;
  peersDroppedSlow: number;
  /** Peers whose media went through werift's own sender (src/delivery/webrtc/rtp-sender.ts could not attach). */
  werift: number;
  /** Peers whose media went through the native fan-out (src/delivery/webrtc/fanout.ts). */
  native: number;
}

/** The WHEP endpoint and its sessions. */
class Whep implements PeerOwner {
  readonly peers = new Map<string, Peer>();
  private readonly sources = new Map<string, StreamAudioSource>();
  readonly counters = { packetsSent: 0, payloadBytesSent: 0, packetsDropped: 0, peersDroppedSlow: 0, werift: 0, native: 0 };
  /** The native fan-out of each source that has native peers. */
  private readonly groups = new Map<StreamAudioSource, FanoutGroup>();
  private readonly hosts: string[];
  private readonly allInterfaces: boolean;
  /** Offers being negotiated or answered and not connected yet, per client address and in total. */
  private readonly pending: PerAddressCounter;
  private sweepTimer: NodeJS.Timeout | null = null;

  constructor(private readonly d: WhepDeps) {
    ({ hosts: this.hosts, allInterfaces: this.allInterfaces } = advertisedHosts(d.config.httpHost));
    this.pending = new PerAddressCounter(d.config.limits.whepMaxPending, d.config.limits.whepMaxPendingPerIp);
  }

  register(): void {
    const http = this.d.http;
    const headers = ['content-type', 'authorization', 'user-agent', 'x-forwarded-for', 'origin'];
    http.rawBody('options', '/whep/:id', () => ({ status: '204 No Content', headers: [...CORS, ['Accept-Post', 'application/sdp']], body: new Uint8Array(0) }), { maxBodyBytes: 0, headers: [] });
    http.rawBody('options', '/whep/:id/:session', () => ({ status: '204 No Content', headers: CORS, body: new Uint8Array(0) }), { maxBodyBytes: 0, headers: [] });
    http.rawBody('post', '/whep/:id', (req) => this.guarded(req, () => this.offer(req)), { maxBodyBytes: MAX_OFFER_BYTES, headers });
    http.rawBody('del', '/whep/:id/:session', (req) => this.guarded(req, () => this.delete(req)), { maxBodyBytes: 0, headers: [] });
    this.sweepTimer = setInterval(() => this.sweep(), QUALIFY_SWEEP_MS);
    this.sweepTimer.unref();
  }

  /**
   * Ends every session that no longer qualifies: its stream was deleted, or the stream needs a
   * listener token (`playback: "token"`) and the session brought none, or its token expired.
   * The stream's policy comes from the 2 s cache, so a change applies within about 3 s.
   */
  sweep(): void {
    if (this.peers.size === 0) return;
    const now = Date.now();
    for (const p of [...this.peers.values()]) {
      let why: string | null = null;
      try {
        const policy = this.d.access.policy(p.streamId);
        if (!policy) why = 'stream deleted';
        else if (policy.playback === 'token' && p.client.tokenExpiresAt === null) why = 'the stream now needs a listener token';
        else if (policy.playback === 'token' && p.client.tokenExpiresAt !== null && p.client.tokenExpiresAt <= now) why = 'listener token expired';
        else if (policy.playback === 'token' && p.client.tokenPublishable && !policy.publishableKeyTokens) why = 'the stream no longer accepts publishable-key tokens';
      } catch (e) {
        // The policy could not be read (database): judged again at the next sweep.
        this.d.log.warn('whep: stream policy unreadable', { streamId: p.streamId, err: (e as Error).message });
        return;
      }
      if (why) p.close(why);
    }
  }

  private guarded(req: RawBodyRequest, fn: () => Promise<RawReply> | RawReply): Promise<RawReply> {
    return guardedSignalling(this.d.log, 'whep', req, fn);
  }

  private async offer(req: RawBodyRequest): Promise<RawReply> {
    const streamId = req.params[0]!;
    if (!/^application\/sdp\s*(;|$)/i.test(req.headers['content-type'] ?? '')) {
      throw new ApiError('unsupported_media_type', 'A WHEP offer is an SDP body with Content-Type: application/sdp (RFC 9725 §4.2).');
    }
    const policy = this.d.access.policy(streamId);
    if (!policy) throw new ApiError('resource_missing', `No such stream: '${streamId}'.`);
    const bearer = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '')?.[1] ?? new URLSearchParams(req.query).get('token') ?? '';
    let key = '';
    let tokenExpiresAt: number | null = null;
    let tokenPublishable = false;
    if (policy.playback === 'token' || bearer) {
      const t = bearer ? await this.d.tokens.verify(bearer) : null;
      const valid = t?.ok === true && t.claims.streamId === streamId;
      if (valid && policy.playback === 'token' && !tokenAdmitted(t.claims, policy.publishableKeyTokens)) {
        throw new ApiError('invalid_token', PUBLISHABLE_REFUSED, { headers: { 'WWW-Authenticate': 'Bearer error="invalid_token"' } });
      }
      if (!valid && policy.playback === 'token') {
        throw new ApiError(
          bearer ? 'invalid_token' : 'missing_token',
          bearer ? 'The listener token is invalid, expired or for another stream.' : 'This stream needs a listener token (Authorization: Bearer <token>).',
          { headers: { 'WWW-Authenticate': bearer ? 'Bearer error="invalid_token"' : 'Bearer' } },
        );
      }
      if (valid && t?.ok) {
        key = `${t.claims.subject}:`;
        tokenExpiresAt = t.claims.expiresAt;
        tokenPublishable = !tokenAdmitted(t.claims, false);
      }
    }
    const hub = this.d.media.get(streamId);
    if (!hub || hub.ended) throw new ApiError('stream_not_live', `Stream '${streamId}' is not live.`);
    const sdp = req.body.toString('utf8');
    if (!/^v=0/m.test(sdp) || !/^m=audio /m.test(sdp)) throw new ApiError('invalid_sdp', 'The offer must be an SDP with an audio m-line.');
    if (this.d.registry.total() >= MAX_LISTENERS) throw capacity();

    // Everything below holds sockets: count it against the pending caps first.
    const ip = clientAddress(req.remoteAddress, req.headers['x-forwarded-for'] ?? '', this.d.trusted);
    const slot = this.pending.tryAcquire(ip);
    if (slot !== 'ok') {
      refusePending(
        this.d.limits,
        'whep',
        slot,
        ip,
        streamId,
        this.d.config.limits.whepOfferTimeoutMs,
        slot === 'total'
          ? 'This node holds as many unconnected WebRTC offers as it may; connect an answered one or retry later.'
          : 'Too many unconnected WebRTC offers from your address; connect or DELETE an answered one, or retry later.',
      );
    }
    let peer: Peer;
    try {
      peer = await this.negotiate(streamId, hub, sdp, { ip, accountId: policy.accountId, keyPrefix: key, userAgent: req.headers['user-agent'] || null, tokenExpiresAt, tokenPublishable });
    } catch (e) {
      this.pending.release(ip);
      throw e;
    }
    this.peers.set(peer.id, peer);
    const location = `/whep/${streamId}/${peer.id}`;
    return {
      status: '201 Created',
      headers: [...CORS, ['Content-Type', 'application/sdp'], ['Location', location], ['ETag', `"${peer.id}"`], ['Cache-Control', 'no-store']],
      body: Buffer.from(this.filterCandidates(peer.pc.localDescription!.sdp), 'utf8'),
    };
  }

  /**
   * Answers `sdp` with a new peer connection (all candidates gathered); the peer is pending.
   * @throws ApiError 400 `invalid_sdp` when werift cannot negotiate the offer, 503 when gathering
   * does not finish within the offer timeout
   */
  private async negotiate(streamId: string, hub: StreamHub, sdp: string, client: OfferClient): Promise<Peer> {
    const timeoutMs = this.d.config.limits.whepOfferTimeoutMs;
    const pc = new RTCPeerConnection(peerConfiguration({ iceServers: this.d.config.iceServers, allInterfaces: this.allInterfaces, hosts: this.hosts }));
    const transceiver = await answerOffer(pc, sdp, 'sendonly', timeoutMs);
    return new Peer(streamId, hub, pc, transceiver, client, this, timeoutMs);
  }

  /** A pending peer connected: it gives back its pending slot, becomes a listener and gets packets. */
  connected(peer: Peer): void {
    if (peer.state !== 'pending') return;
    peer.state = 'connected';
    this.pending.release(peer.client.ip);
    const { streamId, hub } = peer;
    if (hub.ended || this.d.media.get(streamId) !== hub) return peer.close('stream ended');
    try {
      peer.session = this.d.registry.join({
        streamId,
        accountId: peer.client.accountId,
        key: `${peer.client.keyPrefix}whep:${peer.id}`,
        protocol: 'webrtc',
        country: countryOf(peer.client.ip),
        userAgent: peer.client.userAgent,
        timeoutMs: 0,
      });
    } catch (e) {
      // Runs in werift's event callback: nothing may escape.
      if (!(e instanceof TooManyListenersError)) this.d.log.error('whep listener join failed', { streamId, err: e instanceof Error ? e.stack : String(e) });
      return peer.close('listener capacity');
    }
    let source = this.sources.get(streamId);
    if (!source) {
      const s: StreamAudioSource = new StreamAudioSource(streamId, hub, this.codecOf(streamId), this.d.log, () => {
        if (this.sources.get(streamId) === s) this.sources.delete(streamId);
      });
      this.sources.set(streamId, (source = s));
    }
    peer.source = source;
    if (this.joinFanout(peer, source)) return;
    this.mediaPath(peer, peer.useJsSender());
    source.add(peer);
  }

  /**
   * Puts a connected peer on its stream's native fan-out when there is one and the peer's nominated
   * pair is plain UDP with keys it takes. @returns false: the peer keeps a JS sender
   */
  private joinFanout(peer: Peer, source: StreamAudioSource): boolean {
    const make = this.d.fanout;
    const w = make ? weriftMediaState(peer.transceiver) : null;
    if (!make || !w) return false;
    let group = this.groups.get(source);
    const fresh = !group;
    if (!group) {
      const g: FanoutGroup = new FanoutGroup(make(), this.counters, () => {
        if (this.groups.get(source) === g) this.groups.delete(source);
        source.remove(g);
      });
      group = g;
    }
    const id = group.join(peer, w);
    if (id === null) return false;
    peer.group = group;
    peer.fanoutId = id;
    this.counters.native++;
    this.d.log.debug('whep media path: native fan-out', { session: peer.id, srtpProfile: w.ctx.profile });
    if (fresh) {
      this.groups.set(source, group);
      source.add(group);
    }
    return true;
  }

  /**
   * Logs a connected peer's media path: `rtp` (debug, with the SRTP profile), or werift's
   * `sendRtp` when its connection lacks what RtpSender needs (counted; warned once).
   */
  mediaPath(peer: Peer, rtp: RtpSender | null): void {
    if (rtp) this.d.log.debug('whep media path: rtp-sender', { session: peer.id, srtpProfile: rtp.profile });
    else if (this.counters.werift++ === 0) this.d.log.warn('whep: werift connection without the expected SRTP/ICE state; using werift\'s sender', { streamId: peer.streamId });
  }

  /** A pending peer did not connect within the offer timeout: counted, then closed. */
  expired(peer: Peer): void {
    if (peer.state !== 'pending') return;
    this.d.limits.hit('whep_offer_timeout', peer.client.ip, { streamId: peer.streamId });
    peer.close('never connected');
  }

  private delete(req: RawBodyRequest): RawReply {
    const [streamId, id] = req.params as [string, string];
    const peer = this.peers.get(id);
    if (!peer || peer.streamId !== streamId) throw new ApiError('resource_missing', `No such WHEP session: '${id}'.`);
    peer.close('DELETE');
    return { status: '200 OK', headers: CORS, body: new Uint8Array(0) };
  }

  /** Called by a peer once it closed, with the state it was in. */
  forget(peer: Peer, was: 'pending' | 'connected', reason: string): void {
    this.peers.delete(peer.id);
    if (was === 'pending') this.pending.release(peer.client.ip);
    if (peer.session) this.d.registry.leave(peer.session);
    this.d.log.debug('whep session closed', { streamId: peer.streamId, session: peer.id, reason });
  }

  /** The stream's codec: its hub's, else the stream row's. */
  private codecOf(streamId: string): string {
    return this.d.media.get(streamId)?.opts.codec ?? this.d.access.codec(streamId);
  }

  /** Keeps only host candidates on the advertised addresses (unless the HTTP host is a wildcard). */
  private filterCandidates(sdp: string): string {
    return advertisedCandidatesOnly(sdp, this.hosts, this.allInterfaces);
  }

  stats(): WhepStats {
    return { peers: this.peers.size, pending: this.pending.held(), ...this.counters };
  }

  async close(): Promise<void> {
    if (this.sweepTimer) clearInterval(this.sweepTimer);
    this.sweepTimer = null;
    for (const p of [...this.peers.values()]) p.close('server shutdown');
  }
}

/** 503 `listener_capacity`: the node tracks as many listeners as it may. */
const capacity = () => new ApiError('listener_capacity', 'This node serves as many listeners as it can; try again later.');

/** Registers WHEP on `d.http`; returns its stats and shutdown. */
export function registerWhep(d: WhepDeps): { stats(): WhepStats; close(): Promise<void> } {
  const w = new Whep(d);
  w.register();
  return { stats: () => w.stats(), close: () => w.close() };
}
