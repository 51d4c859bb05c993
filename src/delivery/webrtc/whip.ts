/**
 * WHIP (RFC 9725) ingest over WebRTC — the WebRTC side, beside WHEP in werift's one home
 * (docs/behaviour.md "Go live over WHIP"):
 * - `POST /whip/<stream_id>` with `Authorization: Bearer <stream key | publish token>` (§4.1) and an
 *   SDP offer (`Content-Type: application/sdp`, at most 64 KiB) → `201 Created`, the SDP answer (all
 *   candidates included: no trickle), `Location: /whip/<stream_id>/<session>` and `ETag` (§4.2).
 *   No bearer, a wrong key, an unknown or expired token → 401; a publish token of another stream →
 *   403; no such stream → 404; an offer without Opus audio (other audio codecs, or no audio at
 *   all) → 406 `codec_not_acceptable` naming what it offered. Opus only: a video section is answered rejected (port 0, RFC 8829 §5.3.1 / RFC 3264 §6).
 * - `DELETE` on the session URL ends the publish (§4.3): the stream then goes idle by the usual
 *   rules (the reconnect window). `PATCH` (trickle ICE, ICE restart, §4.4) answers 405; `OPTIONS`
 *   answers the CORS preflight of pages on other origins (§4.7).
 * - ICE as for WHEP (src/delivery/webrtc/whep-peer.ts `peerConfiguration`): host candidates, UDP, no
 *   STUN or TURN server unless `SKYLARK_ICE_SERVERS` names some. Once connected, the publisher's
 *   SRTP is taken off werift's ICE connection and decrypted by Skylark's own receive path, which
 *   also sends the RTCP receiver reports (RFC 3550 §6.4.2, every 0.5–1.5 s;
 *   src/delivery/webrtc/rtp-receive.ts); ICE, DTLS and SRTCP stay werift's.
 * - An answered offer is pending until its peer connects (ICE + DTLS): only then does the publish
 *   start (src/live/ingest/whip.ts, through `WhipIngestPort`: the newest publisher wins, so an
 *   offer that never connects takes nothing off air). Pending offers are capped per client address
 *   and in total with WHEP's settings (`whepMaxPendingPerIp`, `whepMaxPending`: → 429
 *   `too_many_pending_offers`), counted apart from WHEP's, and dropped after `whepOfferTimeoutMs`.
 */
import { RTCPeerConnection, type RTCRtpTransceiver, type RtpPacket } from 'werift';
import type { BlockList } from 'node:net';
import type { HttpServer, RawBodyRequest, RawReply } from '../../base/http/server.js';
import { ApiError } from '../../base/errors/errors.js';
import type { Config } from '../../base/config.js';
import type { Logger } from '../../base/logger.js';
import { randomBase62 } from '../../base/ids.js';
import { PerAddressCounter, type Limits } from '../../base/limits/limits.js';
import { looksLikeToken, type PublishTokens } from '../../base/auth/publish-tokens.js';
import { clientAddress } from '../../base/http/client-address.js';
import { peerConfiguration } from './whep-peer.js';
import { advertisedCandidatesOnly, advertisedHosts, answerOffer, ConnectionWatch, guardedSignalling, refusePending, SIGNALLING_CORS as CORS } from './signalling.js';
import { RtpReceive } from './rtp-receive.js';
import { NativeRtpReceive, type NativeReceiveCounts } from './rtp-receive-native.js';
import type { WhipNativeSink } from '../../native/whip-receive.js';

/** Largest SDP offer accepted (bytes). */
const MAX_OFFER_BYTES = 64 * 1024;

/** How a publish proves itself (src/live/ingest/whip.ts `WhipCredential`). */
export type WhipCredentialArg = { key: string } | { publishToken: true };

/** One running publish, as the WebRTC side feeds it. */
export interface WhipPublishHandle {
  /** One RTP packet of the Opus track: 16-bit sequence number, 32-bit timestamp, payload, SSRC. */
  rtp(seq: number, timestamp: number, payload: Uint8Array, ssrc: number): void;
  /** Ends the publish (DELETE, the peer went away). */
  close(reason: string): void;
  /** The publish's side of the native receive (src/native/whip-receive.ts); absent: `rtp` only. */
  nativeSink?(): WhipNativeSink;
}

/** What the WebRTC side asks of ingest (src/live/ingest/whip.ts `WhipIngest` implements it; the app wires it). */
export interface WhipIngestPort {
  /** Whether the credential may publish to the stream now (nothing attached). */
  check(streamId: string, credential: WhipCredentialArg): { ok: true } | { ok: false; why: 'unknown_stream' | 'refused' };
  /** Starts the publish; null: refused now. `events.closed`: ingest ended it (the peer must close). */
  open(streamId: string, credential: WhipCredentialArg, remote: string, events: { closed(reason: string): void }): WhipPublishHandle | null;
}

export interface WhipDeps {
  http: HttpServer;
  ingest: WhipIngestPort;
  tokens: PublishTokens;
  trusted: BlockList;
  config: Config;
  log: Logger;
  limits: Limits;
}

/** Counters of WHIP (bench, logs). */
export interface WhipStats {
  /** Sessions open, pending ones included. */
  sessions: number;
  pending: number;
  packetsReceived: number;
  /** Publishers on the native receive (src/native/whip-receive.ts) now. */
  nativeReceives: number;
  /** Their counters (src/native/whip-receive.ts `WhipReceiveCounts`, and consent checks answered). */
  native: NativeReceiveCounts[];
}

/** One WHIP session: pending (answered, not connected), publishing, or closed. */
class WhipSession {
  readonly id = randomBase62(24);
  state: 'pending' | 'publishing' | 'closed' = 'pending';
  publish: WhipPublishHandle | null = null;
  /** The publisher's SRTP receive (./rtp-receive.ts or ./rtp-receive-native.ts); null: werift's receive path. */
  receive: RtpReceive | NativeRtpReceive | null = null;
  /** The offer's non-audio sections, answered rejected (`withoutNonAudio`). */
  rejected: RejectedSection[] = [];
  private readonly watch: ConnectionWatch;

  constructor(
    readonly streamId: string,
    readonly pc: RTCPeerConnection,
    readonly transceiver: RTCRtpTransceiver,
    readonly ip: string,
    readonly credential: WhipCredentialArg,
    private readonly owner: Whip,
    offerTimeoutMs: number,
  ) {
    this.watch = new ConnectionWatch(pc, offerTimeoutMs, {
      pending: () => this.state === 'pending',
      live: () => this.state === 'publishing',
      expired: () => owner.expired(this),
      connected: () => owner.connected(this),
      close: (reason) => this.close(reason),
    });
  }

  /** Ends the session: the publish (if any) ends, the pending slot is given back, the connection closes. */
  close(reason: string): void {
    if (this.state === 'closed') return;
    const was = this.state;
    this.state = 'closed';
    this.watch.stop();
    if (this.receive instanceof NativeRtpReceive) this.owner.dropNative(this.receive);
    this.receive?.close();
    this.receive = null;
    const p = this.publish;
    this.publish = null;
    p?.close(reason);
    this.owner.forget(this, was, reason);
    this.pc.close().catch(() => {});
  }
}

/** The WHIP endpoint and its sessions. */
class Whip {
  readonly sessions = new Map<string, WhipSession>();
  private readonly pending: PerAddressCounter;
  private readonly hosts: string[];
  private readonly allInterfaces: boolean;
  packetsReceived = 0;
  /** The native receives open (their packets are counted when `stats` is read and when they close). */
  private readonly natives = new Set<NativeRtpReceive>();

  constructor(private readonly d: WhipDeps) {
    ({ hosts: this.hosts, allInterfaces: this.allInterfaces } = advertisedHosts(d.config.httpHost));
    this.pending = new PerAddressCounter(d.config.limits.whepMaxPending, d.config.limits.whepMaxPendingPerIp);
  }

  register(): void {
    const http = this.d.http;
    const headers = ['content-type', 'authorization', 'x-forwarded-for'];
    http.rawBody('options', '/whip/:id', () => ({ status: '204 No Content', headers: [...CORS, ['Accept-Post', 'application/sdp']], body: new Uint8Array(0) }), { maxBodyBytes: 0, headers: [] });
    http.rawBody('options', '/whip/:id/:session', () => ({ status: '204 No Content', headers: CORS, body: new Uint8Array(0) }), { maxBodyBytes: 0, headers: [] });
    http.rawBody('post', '/whip/:id', (req) => this.guarded(req, () => this.offer(req)), { maxBodyBytes: MAX_OFFER_BYTES, headers });
    http.rawBody('del', '/whip/:id/:session', (req) => this.guarded(req, () => this.delete(req)), { maxBodyBytes: 0, headers: [] });
    http.rawBody('patch', '/whip/:id/:session', (req) => this.guarded(req, () => notAllowed()), { maxBodyBytes: MAX_OFFER_BYTES, headers: [] });
  }

  private guarded(req: RawBodyRequest, fn: () => Promise<RawReply> | RawReply): Promise<RawReply> {
    return guardedSignalling(this.d.log, 'whip', req, fn);
  }

  /**
   * The publish credential of the request (RFC 9725 §4.1 bearer): a publish token for this stream
   * or a stream key that the stream takes.
   * @throws ApiError 401 (none, wrong key, unknown or expired token), 403 (another stream's token), 404 (no such stream)
   */
  private async credential(streamId: string, authorization: string): Promise<WhipCredentialArg> {
    const bearer = /^Bearer\s+(\S+)\s*$/i.exec(authorization)?.[1] ?? '';
    const www = { headers: { 'WWW-Authenticate': 'Bearer realm="whip"' } };
    if (!bearer) throw new ApiError('missing_token', 'A WHIP publish needs Authorization: Bearer <stream key or publish token> (RFC 9725 §4.1).', www);
    let credential: WhipCredentialArg = { key: bearer };
    if (looksLikeToken(bearer)) {
      const t = await this.d.tokens.verify(bearer);
      if (!t.ok) throw new ApiError(t.reason === 'expired' ? 'token_expired' : 'invalid_token', t.reason === 'expired' ? 'The publish token has expired.' : 'The publish token is not valid.', www);
      if (t.streamId !== streamId) throw new ApiError('invalid_token', 'This publish token is for another stream.', { status: 403 });
      credential = { publishToken: true };
    }
    const c = this.d.ingest.check(streamId, credential);
    if (!c.ok && c.why === 'unknown_stream') throw new ApiError('resource_missing', `No such stream: '${streamId}'.`);
    if (!c.ok) throw new ApiError('invalid_token', 'The stream key is wrong for this stream.', www);
    return credential;
  }

  private async offer(req: RawBodyRequest): Promise<RawReply> {
    const streamId = req.params[0]!;
    if (!/^application\/sdp\s*(;|$)/i.test(req.headers['content-type'] ?? '')) {
      throw new ApiError('unsupported_media_type', 'A WHIP offer is an SDP body with Content-Type: application/sdp (RFC 9725 §4.2).');
    }
    const credential = await this.credential(streamId, req.headers.authorization ?? '');
    const sdp = req.body.toString('utf8');
    acceptableOffer(sdp);
    const ip = clientAddress(req.remoteAddress, req.headers['x-forwarded-for'] ?? '', this.d.trusted);
    const slot = this.pending.tryAcquire(ip);
    if (slot !== 'ok') {
      refusePending(this.d.limits, 'whip', slot, ip, streamId, this.d.config.limits.whepOfferTimeoutMs, 'Too many unconnected WHIP offers from your address (or in all); connect or DELETE an answered one, or retry later.');
    }
    let session: WhipSession;
    try {
      session = await this.negotiate(streamId, sdp, ip, credential);
    } catch (e) {
      this.pending.release(ip);
      throw e;
    }
    this.sessions.set(session.id, session);
    return {
      status: '201 Created',
      headers: [...CORS, ['Content-Type', 'application/sdp'], ['Location', `/whip/${streamId}/${session.id}`], ['ETag', `"${session.id}"`], ['Cache-Control', 'no-store']],
      body: Buffer.from(withRejected(this.answerSdp(session.pc.localDescription!.sdp), session.rejected), 'utf8'),
    };
  }

  /**
   * Answers `sdp` with a new receive-only peer connection (all candidates gathered); pending.
   * @throws ApiError 400 `invalid_sdp` when werift cannot negotiate the offer, 503 when gathering does not finish in time
   */
  private async negotiate(streamId: string, sdp: string, ip: string, credential: WhipCredentialArg): Promise<WhipSession> {
    const timeoutMs = this.d.config.limits.whepOfferTimeoutMs;
    const pc = new RTCPeerConnection(peerConfiguration({ iceServers: this.d.config.iceServers, allInterfaces: this.allInterfaces, hosts: this.hosts }));
    const offer = withoutNonAudio(sdp);
    const transceiver = await answerOffer(pc, offer.sdp, 'recvonly', timeoutMs, (audio) => {
      for (const t of pc.getTransceivers()) if (t !== audio) t.setDirection('inactive');
    });
    const session = new WhipSession(streamId, pc, transceiver, ip, credential, this, timeoutMs);
    session.rejected = offer.rejected;
    return session;
  }

  /** The peer connected: the publish starts (it may be refused now: the key was reset meanwhile). */
  connected(s: WhipSession): void {
    if (s.state !== 'pending') return;
    s.state = 'publishing';
    this.pending.release(s.ip);
    let publish: WhipPublishHandle | null;
    try {
      publish = this.d.ingest.open(s.streamId, s.credential, s.ip, { closed: (reason) => s.close(reason) });
    } catch (e) {
      // Runs in werift's event callback: nothing may escape.
      this.d.log.error('whip publish failed to start', { streamId: s.streamId, err: e instanceof Error ? e.stack : String(e) });
      publish = null;
    }
    if (!publish) return s.close('publish refused');
    s.publish = publish;
    const opus = s.transceiver.codecs.find((c) => c.mimeType.toLowerCase() === 'audio/opus');
    const pt = opus?.payloadType;
    if (opus && pt !== undefined) {
      if (this.native(s, publish, pt, opus.clockRate)) return;
      s.receive = RtpReceive.attach(s.transceiver, pt, opus.clockRate, (seq, ts, payload, ssrc) => {
        if (s.state !== 'publishing') return;
        this.packetsReceived++;
        s.publish?.rtp(seq, ts, payload, ssrc);
      });
      if (s.receive) return;
    }
    // werift's own receive path (its connection does not have the shape RtpReceive relies on).
    this.d.log.warn('whip publish on werift\'s receive path', { streamId: s.streamId });
    const onRtp = (rtp: RtpPacket) => {
      if (rtp.header.payloadType !== pt || s.state !== 'publishing') return;
      this.packetsReceived++;
      s.publish?.rtp(rtp.header.sequenceNumber, rtp.header.timestamp, rtp.payload, rtp.header.ssrc);
    };
    const track = s.transceiver.receiver.track;
    track.onReceiveRtp.subscribe(onRtp);
    s.transceiver.onTrack.subscribe((t) => {
      if (t !== track) t.onReceiveRtp.subscribe(onRtp);
    });
  }

  /** The native receive (`SKYLARK_WHIP_NATIVE_RECEIVE`) on `s`: false when it is off or the connection lacks its shape. */
  private native(s: WhipSession, publish: WhipPublishHandle, pt: number, clockRate: number): boolean {
    const sink = this.d.config.whipNativeReceive ? publish.nativeSink?.() : undefined;
    if (!sink) return false;
    let r: NativeRtpReceive | null = null;
    try {
      r = NativeRtpReceive.attach(s.transceiver, pt, clockRate, sink, (why) => {
        this.d.log.warn('whip native receive failed', { streamId: s.streamId, why });
        s.close(`socket failed: ${why}`);
      }, this.d.config.whipNativeRtcp);
    } catch (e) {
      this.d.log.warn('whip native receive refused', { streamId: s.streamId, err: (e as Error).message });
    }
    if (!r) return false;
    s.receive = r;
    this.natives.add(r);
    return true;
  }

  /** A pending session did not connect within the offer timeout: counted, then closed. */
  expired(s: WhipSession): void {
    if (s.state !== 'pending') return;
    this.d.limits.hit('whip_offer_timeout', s.ip, { streamId: s.streamId });
    s.close('never connected');
  }

  private delete(req: RawBodyRequest): RawReply {
    const [streamId, id] = req.params as [string, string];
    const s = this.sessions.get(id);
    if (!s || s.streamId !== streamId) throw new ApiError('resource_missing', `No such WHIP session: '${id}'.`);
    s.close('DELETE');
    return { status: '200 OK', headers: CORS, body: new Uint8Array(0) };
  }

  /** A session's native receive ends: its last packets are counted. */
  dropNative(r: NativeRtpReceive): void {
    this.packetsReceived += r.takePackets();
    this.natives.delete(r);
  }

  /** Called by a session once it closed, with the state it was in. */
  forget(s: WhipSession, was: 'pending' | 'publishing', reason: string): void {
    this.sessions.delete(s.id);
    if (was === 'pending') this.pending.release(s.ip);
    this.d.log.debug('whip session closed', { streamId: s.streamId, session: s.id, reason });
  }

  /** The answer's host candidates: on the advertised addresses only (unless the HTTP host is a wildcard). */
  private answerSdp(sdp: string): string {
    return advertisedCandidatesOnly(sdp, this.hosts, this.allInterfaces);
  }

  stats(): WhipStats {
    const native: NativeReceiveCounts[] = [];
    for (const r of this.natives) {
      this.packetsReceived += r.takePackets();
      native.push(r.counts());
    }
    return { sessions: this.sessions.size, pending: this.pending.held(), packetsReceived: this.packetsReceived, nativeReceives: this.natives.size, native };
  }

  async close(): Promise<void> {
    for (const s of [...this.sessions.values()]) s.close('server shutdown');
  }
}

/** 405: trickle ICE and ICE restarts (RFC 9725 §4.4) are not taken; `Allow` lists what is. */
function notAllowed(): RawReply {
  throw new ApiError('method_not_allowed', 'Trickle ICE and ICE restarts are not supported: the answer carries every candidate (RFC 9725 §4.4).', { headers: { Allow: 'DELETE, OPTIONS' } });
}

/**
 * Checks that an offer is an SDP with an audio section offering Opus (RFC 7587 `opus/48000/2`).
 * @throws ApiError 400 `invalid_sdp` (not an SDP, no media section), 406 `codec_not_acceptable` (no Opus audio section) naming what was offered
 */
export function acceptableOffer(sdp: string): void {
  if (!/^v=0/m.test(sdp)) throw new ApiError('invalid_sdp', 'The offer is not an SDP (RFC 8866).');
  const sections = sdp.split(/\r?\n(?=m=)/).slice(1);
  if (sections.length === 0) throw new ApiError('invalid_sdp', 'The offer has no media section.');
  const audio = sections.filter((s) => s.startsWith('m=audio '));
  const codecs = new Set<string>();
  for (const s of audio) for (const m of s.matchAll(/^a=rtpmap:\d+ ([^/\s]+)\//gm)) codecs.add(m[1]!);
  if (![...codecs].some((c) => c.toLowerCase() === 'opus')) {
    const offered = audio.length ? [...codecs].join(', ') || 'no codec' : `no audio; ${sections.map((s) => /^m=(\S+)/.exec(s)?.[1]).join(', ')} only`;
    throw new ApiError('codec_not_acceptable', `The offer has no Opus audio (offered: ${offered}); this node takes Opus only (RFC 7587).`);
  }
}

/** A section of the offer that is not audio: where it was, and what its rejection in the answer says. */
interface RejectedSection {
  index: number;
  /** `m=video 0 UDP/TLS/RTP/SAVPF 96 97` and its `a=mid:` line. */
  lines: string[];
}

/** An SDP split into its session part and its media sections (each from its `m=` line). */
function sections(sdp: string): { session: string[]; media: string[][] } {
  const lines = sdp.split(/\r?\n/).filter((l, i, all) => l !== '' || i < all.length - 1);
  const session: string[] = [];
  const media: string[][] = [];
  for (const l of lines) {
    if (l.startsWith('m=')) media.push([l]);
    else if (media.length > 0) media[media.length - 1]!.push(l);
    else if (l !== '') session.push(l);
  }
  return { session, media };
}

const join = (session: string[], media: string[][]) => [...session, ...media.flat()].filter((l) => l !== '').join('\r\n') + '\r\n';

/**
 * The offer without its non-audio sections (video, data), which are answered rejected: port 0,
 * the offer's formats, its `a=mid` (RFC 3264 §6, RFC 8829 §5.3.1), and out of the BUNDLE group
 * (RFC 8843 §7.3.3). werift then negotiates the audio alone.
 */
export function withoutNonAudio(sdp: string): { sdp: string; rejected: RejectedSection[] } {
  const { session, media } = sections(sdp);
  const rejected: RejectedSection[] = [];
  const kept: string[][] = [];
  media.forEach((m, index) => {
    if (m[0]!.startsWith('m=audio ')) return void kept.push(m);
    const [kind, , proto, ...fmt] = m[0]!.split(' ');
    const mid = m.find((l) => l.startsWith('a=mid:'));
    rejected.push({ index, lines: [`${kind} 0 ${proto} ${fmt.join(' ')}`, 'c=IN IP4 0.0.0.0', ...(mid ? [mid] : []), 'a=inactive'] });
  });
  if (rejected.length === 0) return { sdp, rejected };
  const gone = new Set(rejected.flatMap((r) => r.lines.filter((l) => l.startsWith('a=mid:')).map((l) => l.slice(6))));
  const group = session.map((l) => (l.startsWith('a=group:BUNDLE') ? l.split(' ').filter((t, i) => i === 0 || !gone.has(t)).join(' ') : l));
  return { sdp: join(group, kept), rejected };
}

/** The answer with the rejected sections put back in the offer's order. */
function withRejected(answer: string, rejected: RejectedSection[]): string {
  if (rejected.length === 0) return answer;
  const { session, media } = sections(answer);
  for (const r of rejected) media.splice(r.index, 0, r.lines);
  return join(session, media);
}

/** Registers WHIP on `d.http`; returns its stats and shutdown. */
export function registerWhip(d: WhipDeps): { stats(): WhipStats; close(): Promise<void> } {
  const w = new Whip(d);
  w.register();
  return { stats: () => w.stats(), close: () => w.close() };
}
