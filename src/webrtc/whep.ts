/**
 * WHEP (RFC 9725) playback over WebRTC, the only home of werift:
 * - `POST /whep/<stream_id>` with an SDP offer (`Content-Type: application/sdp`) → `201 Created`,
 *   the SDP answer (all candidates included: no trickle needed), `Location: /whep/<stream_id>/<session>`
 *   and `ETag` (RFC 9725 §4.2). The answer sends one Opus track (RFC 7587) from the stream's shared
 *   packet source (src/webrtc/source.ts).
 * - `DELETE` on the session URL ends it (§4.3); `PATCH` (trickle ICE / ICE restart, §4.4) is not
 *   implemented and answers 405; `OPTIONS` answers the CORS preflight of browsers (§4.7).
 * - Token streams need the listener token as `Authorization: Bearer <token>` (§4.6) or `?token=`
 *   (401 without a valid one); the peer is a listener (`protocol: "webrtc"`) until it closes.
 * ICE: host candidates on 127.0.0.1 and the configured HTTP host (all interfaces when that is a
 * wildcard), UDP, IPv4. ICE/DTLS/SRTP by werift.
 */
import { RTCPeerConnection, RTCRtpCodecParameters, RtpHeader, RtpPacket, type RTCRtpTransceiver } from 'werift';
import type { BlockList } from 'node:net';
import type { HttpServer, RawBodyRequest, RawReply } from '../http/server.js';
import { errorBody } from '../http/server.js';
import { ApiError } from '../errors/errors.js';
import type { MediaRegistry } from '../media/hub.js';
import type { Config, PublicUrls } from '../config/config.js';
import type { Logger } from '../log/logger.js';
import type { ListenerTokens } from '../auth/listener-tokens.js';
import { randomBase62 } from '../ids.js';
import type { ListenerRegistry, Session } from '../listeners/registry.js';
import { TooManyListenersError } from '../listeners/registry.js';
import type { HlsListenerAccess } from '../listeners/hls-access.js';
import { clientAddress, countryOf } from '../listeners/geo.js';
import { StreamAudioSource, type PacketSink } from './source.js';

/** Largest SDP offer accepted (bytes). */
const MAX_OFFER_BYTES = 64 * 1024;
/** A peer that has not connected this long after its answer is dropped (ms). */
const CONNECT_TIMEOUT_MS = 30_000;
/** A peer `disconnected` this long is dropped (ms). */
const DISCONNECTED_GRACE_MS = 10_000;
/** Packets a peer may have in flight in werift (encrypting/sending); more are dropped for it. */
const PEER_QUEUE = 32;
/** A peer that has dropped every packet for this long is closed as too slow (ms). */
const PEER_MAX_DROPPING_MS = 5000;
/** The Opus payload type we answer with when the offer has none we can match. */
const OPUS = () => new RTCRtpCodecParameters({ mimeType: 'audio/opus', clockRate: 48000, channels: 2, payloadType: 111, parameters: 'minptime=10;useinbandfec=1' });

const CORS: ReadonlyArray<readonly [string, string]> = [
  ['Access-Control-Allow-Origin', '*'],
  ['Access-Control-Allow-Methods', 'POST, DELETE, OPTIONS'],
  ['Access-Control-Allow-Headers', 'Authorization, Content-Type, If-Match'],
  ['Access-Control-Expose-Headers', 'Location, ETag, Link, Accept-Patch'],
  ['Access-Control-Max-Age', '600'],
];

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
  /** Looks a stream up (status and codec); defaults to the access policy's repo. */
}

/** Counters of the WebRTC side (bench, logs). */
export interface WhepStats {
  peers: number;
  packetsSent: number;
  packetsDropped: number;
  peersDroppedSlow: number;
}

/** One WHEP session: a werift peer connection with its Opus sender. */
class Peer implements PacketSink {
  readonly id = randomBase62(24);
  session: Session | null = null;
  source: StreamAudioSource | null = null;
  private sender;
  private inflight = 0;
  /** When the current run of drops began (0: not dropping). */
  private droppingSince = 0;
  private closed = false;
  private connectTimer: NodeJS.Timeout | null = null;
  private graceTimer: NodeJS.Timeout | null = null;

  constructor(readonly streamId: string, readonly pc: RTCPeerConnection, transceiver: RTCRtpTransceiver, private readonly owner: Whep) {
    this.sender = transceiver.sender;
    this.connectTimer = setTimeout(() => this.close('never connected'), CONNECT_TIMEOUT_MS);
    this.connectTimer.unref();
    pc.connectionStateChange.subscribe((state) => {
      if (state === 'connected') {
        if (this.connectTimer) clearTimeout(this.connectTimer);
        if (this.graceTimer) clearTimeout(this.graceTimer);
        this.connectTimer = this.graceTimer = null;
      } else if (state === 'failed' || state === 'closed') this.close(`connection ${state}`);
      else if (state === 'disconnected' && !this.graceTimer) {
        this.graceTimer = setTimeout(() => this.close('disconnected'), DISCONNECTED_GRACE_MS);
        this.graceTimer.unref();
      }
    });
  }

  send(seq: number, timestamp: number, payload: Buffer, marker: boolean): void {
    if (this.closed || this.pc.connectionState !== 'connected') return;
    if (this.inflight >= PEER_QUEUE) {
      this.owner.counters.packetsDropped++;
      const now = Date.now();
      if (this.droppingSince === 0) this.droppingSince = now;
      else if (now - this.droppingSince >= PEER_MAX_DROPPING_MS) {
        this.owner.counters.peersDroppedSlow++;
        this.close('too slow');
      }
      return;
    }
    this.droppingSince = 0;
    this.inflight++;
    this.owner.counters.packetsSent++;
    // werift's sender rewrites ssrc/payload type/extensions in place: one packet object per peer.
    const pkt = new RtpPacket(new RtpHeader({ sequenceNumber: seq, timestamp, marker, payloadType: 111 }), payload);
    this.sender.sendRtp(pkt).then(this.done, this.done);
  }

  private readonly done = () => {
    this.inflight--;
  };

  /** Ends the session: leaves the source and the listener registry, closes the connection. */
  close(reason: string): void {
    if (this.closed) return;
    this.closed = true;
    if (this.connectTimer) clearTimeout(this.connectTimer);
    if (this.graceTimer) clearTimeout(this.graceTimer);
    this.source?.remove(this);
    this.owner.forget(this, reason);
    this.pc.close().catch(() => {});
  }
}

/** The WHEP endpoint and its sessions. */
class Whep {
  readonly peers = new Map<string, Peer>();
  private readonly sources = new Map<string, StreamAudioSource>();
  readonly counters = { packetsSent: 0, packetsDropped: 0, peersDroppedSlow: 0 };
  private readonly hosts: string[];
  private readonly allInterfaces: boolean;

  constructor(private readonly d: WhepDeps) {
    const h = d.config.httpHost;
    this.allInterfaces = h === '0.0.0.0' || h === '::';
    this.hosts = [...new Set(['127.0.0.1', ...(this.allInterfaces || h === 'localhost' || h.includes(':') ? [] : [h])])];
  }

  register(): void {
    const http = this.d.http;
    const headers = ['content-type', 'authorization', 'user-agent', 'x-forwarded-for', 'origin'];
    http.rawBody('options', '/whep/:id', () => ({ status: '204 No Content', headers: [...CORS, ['Accept-Post', 'application/sdp']], body: new Uint8Array(0) }), { maxBodyBytes: 0, headers: [] });
    http.rawBody('options', '/whep/:id/:session', () => ({ status: '204 No Content', headers: CORS, body: new Uint8Array(0) }), { maxBodyBytes: 0, headers: [] });
    http.rawBody('post', '/whep/:id', (req) => this.guarded(req, () => this.offer(req)), { maxBodyBytes: MAX_OFFER_BYTES, headers });
    http.rawBody('del', '/whep/:id/:session', (req) => this.guarded(req, () => this.delete(req)), { maxBodyBytes: 0, headers: [] });
  }

  /** Answers errors as the JSON envelope with the CORS headers (a browser must see the status). */
  private async guarded(req: RawBodyRequest, fn: () => Promise<RawReply> | RawReply): Promise<RawReply> {
    try {
      return await fn();
    } catch (e) {
      if (!(e instanceof ApiError)) {
        this.d.log.error('whep request failed', { requestId: req.requestId, err: e instanceof Error ? e.stack : String(e) });
        e = new ApiError(500, 'internal_error', 'An internal error occurred. Quote the request id when you report it.');
      }
      const err = e as ApiError;
      return {
        status: `${err.status} ${err.status === 401 ? 'Unauthorized' : err.status === 404 ? 'Not Found' : err.status === 409 ? 'Conflict' : err.status === 415 ? 'Unsupported Media Type' : err.status === 503 ? 'Service Unavailable' : err.status === 400 ? 'Bad Request' : 'Error'}`,
        headers: [...CORS, ['Content-Type', 'application/json; charset=utf-8'], ['Cache-Control', 'no-store'], ...Object.entries(err.headers)],
        body: Buffer.from(JSON.stringify(errorBody(err, req.requestId))),
      };
    }
  }

  private async offer(req: RawBodyRequest): Promise<RawReply> {
    const streamId = req.params[0]!;
    if (!/^application\/sdp\s*(;|$)/i.test(req.headers['content-type'] ?? '')) {
      throw new ApiError(415, 'unsupported_media_type', 'A WHEP offer is an SDP body with Content-Type: application/sdp (RFC 9725 §4.2).');
    }
    const policy = this.d.access.policy(streamId);
    if (!policy) throw new ApiError(404, 'resource_missing', `No such stream: '${streamId}'.`);
    const bearer = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '')?.[1] ?? new URLSearchParams(req.query).get('token') ?? '';
    let key = '';
    if (policy.playback === 'token' || bearer) {
      const t = bearer ? await this.d.tokens.verify(bearer) : null;
      const valid = t?.ok === true && t.claims.streamId === streamId;
      if (!valid && policy.playback === 'token') {
        throw new ApiError(401, bearer ? 'invalid_token' : 'missing_token', bearer ? 'The listener token is invalid, expired or for another stream.' : 'This stream needs a listener token (Authorization: Bearer <token>).', undefined, {
          'WWW-Authenticate': bearer ? 'Bearer error="invalid_token"' : 'Bearer',
        });
      }
      if (valid && t?.ok) key = `${t.claims.subject}:`;
    }
    const hub = this.d.media.get(streamId);
    if (!hub || hub.ended) throw new ApiError(409, 'stream_not_live', `Stream '${streamId}' is not live.`);
    const codec = this.codecOf(streamId);
    const sdp = req.body.toString('utf8');
    if (!/^v=0/m.test(sdp) || !/^m=audio /m.test(sdp)) throw new ApiError(400, 'invalid_sdp', 'The offer must be an SDP with an audio m-line.');

    const pc = new RTCPeerConnection({
      codecs: { audio: [OPUS()], video: [] },
      headerExtensions: { audio: [], video: [] },
      iceUseIpv4: true,
      iceUseIpv6: false,
      iceAdditionalHostAddresses: this.hosts,
    });
    let transceiver: RTCRtpTransceiver | undefined;
    try {
      await pc.setRemoteDescription({ type: 'offer', sdp });
      transceiver = pc.getTransceivers().find((t) => t.kind === 'audio');
      if (!transceiver) throw new ApiError(400, 'invalid_sdp', 'The offer has no audio m-line.');
      transceiver.setDirection('sendonly');
      await pc.setLocalDescription(await pc.createAnswer());
      await gathered(pc);
    } catch (e) {
      pc.close().catch(() => {});
      if (e instanceof ApiError) throw e;
      throw new ApiError(400, 'invalid_sdp', `The offer could not be negotiated: ${(e as Error).message}`);
    }
    const answer = this.filterCandidates(pc.localDescription!.sdp);
    const peer = new Peer(streamId, pc, transceiver, this);
    try {
      const ip = clientAddress(req.remoteAddress, req.headers['x-forwarded-for'] ?? '', this.d.trusted);
      peer.session = this.d.registry.join({
        streamId,
        accountId: policy.accountId,
        key: `${key}whep:${peer.id}`,
        protocol: 'webrtc',
        country: countryOf(ip),
        userAgent: req.headers['user-agent'] || null,
        timeoutMs: 0,
      });
    } catch (e) {
      pc.close().catch(() => {});
      if (e instanceof TooManyListenersError) throw new ApiError(503, 'listener_capacity', 'This node serves as many listeners as it can; try again later.');
      throw e;
    }
    this.peers.set(peer.id, peer);
    let source = this.sources.get(streamId);
    if (!source) {
      const s: StreamAudioSource = new StreamAudioSource(streamId, hub, codec, this.d.log, () => {
        if (this.sources.get(streamId) === s) this.sources.delete(streamId);
      });
      this.sources.set(streamId, (source = s));
    }
    peer.source = source;
    source.add(peer);
    const location = `/whep/${streamId}/${peer.id}`;
    return {
      status: '201 Created',
      headers: [...CORS, ['Content-Type', 'application/sdp'], ['Location', location], ['ETag', `"${peer.id}"`], ['Cache-Control', 'no-store']],
      body: Buffer.from(answer, 'utf8'),
    };
  }

  private delete(req: RawBodyRequest): RawReply {
    const [streamId, id] = req.params as [string, string];
    const peer = this.peers.get(id);
    if (!peer || peer.streamId !== streamId) throw new ApiError(404, 'resource_missing', `No such WHEP session: '${id}'.`);
    peer.close('DELETE');
    return { status: '200 OK', headers: CORS, body: new Uint8Array(0) };
  }

  /** Called by a peer once it closed. */
  forget(peer: Peer, reason: string): void {
    this.peers.delete(peer.id);
    if (peer.session) this.d.registry.leave(peer.session);
    this.d.log.debug('whep session closed', { streamId: peer.streamId, session: peer.id, reason });
  }

  /** The stream's codec; the hub's audio header tells Opus from AAC, the stream row settles the rest. */
  private codecOf(streamId: string): string {
    const h = this.d.media.get(streamId)?.audioHeader;
    if (h && h[0]! >> 4 === 9 && String.fromCharCode(h[1]!, h[2]!, h[3]!, h[4]!) === 'Opus') return 'opus';
    if (h && h[0]! >> 4 === 10) return 'aac';
    return this.d.access.codec(streamId);
  }

  /** Keeps only host candidates on the advertised addresses (unless the HTTP host is a wildcard). */
  private filterCandidates(sdp: string): string {
    if (this.allInterfaces) return sdp;
    return sdp
      .split('\r\n')
      .filter((l) => {
        if (!l.startsWith('a=candidate:')) return true;
        const parts = l.split(' ');
        return this.hosts.includes(parts[4] ?? '');
      })
      .join('\r\n');
  }

  stats(): WhepStats {
    return { peers: this.peers.size, ...this.counters };
  }

  async close(): Promise<void> {
    for (const p of [...this.peers.values()]) p.close('server shutdown');
  }
}

/** Resolves once ICE gathering is complete (non-trickle answer). */
function gathered(pc: RTCPeerConnection): Promise<void> {
  if (pc.iceGatheringState === 'complete') return Promise.resolve();
  return new Promise((resolve) => {
    const { unSubscribe } = pc.iceGatheringStateChange.subscribe((s) => {
      if (s === 'complete') {
        unSubscribe();
        resolve();
      }
    });
  });
}

/** Registers WHEP on `d.http`; returns its stats and shutdown. */
export function registerWhep(d: WhepDeps): { stats(): WhepStats; close(): Promise<void> } {
  const w = new Whep(d);
  w.register();
  return { stats: () => w.stats(), close: () => w.close() };
}
