/**
 * What WHEP playback and WHIP ingest share of RFC 9725 signalling (docs/behaviour.md §13 WebRTC,
 * §18 "Go live over WHIP"): the CORS headers of their answers, the host candidates an answer may
 * list, the JSON error envelope with CORS, the pending-offer refusal, answering an offer with all
 * candidates gathered, and the connection watch of a session (offer timeout, disconnected grace).
 * src/delivery/webrtc/whep.ts and src/delivery/webrtc/whip.ts use it; werift stays this folder's.
 */
import type { RTCPeerConnection, RTCRtpTransceiver } from 'werift';
import type { RawBodyRequest, RawReply } from '../../base/http/server.js';
import { errorBody, statusLine } from '../../base/http/server.js';
import { ApiError, internalError } from '../../base/errors/errors.js';
import type { Logger } from '../../base/logger.js';
import type { Limits } from '../../base/limits/limits.js';

/** A peer `disconnected` this long is dropped (ms). */
export const DISCONNECTED_GRACE_MS = 10_000;

/** The CORS headers of every WHEP and WHIP answer, errors included (RFC 9725 §4.7). */
export const SIGNALLING_CORS: ReadonlyArray<readonly [string, string]> = [
  ['Access-Control-Allow-Origin', '*'],
  ['Access-Control-Allow-Methods', 'POST, DELETE, OPTIONS'],
  ['Access-Control-Allow-Headers', 'Authorization, Content-Type, If-Match'],
  ['Access-Control-Expose-Headers', 'Location, ETag, Link, Accept-Patch'],
  ['Access-Control-Max-Age', '600'],
];

/**
 * The addresses an answer's host candidates may name: 127.0.0.1 and the HTTP host when it is one
 * IPv4 address; `allInterfaces` when the HTTP host is a wildcard (every interface's candidates stay).
 */
export function advertisedHosts(httpHost: string): { hosts: string[]; allInterfaces: boolean } {
  const allInterfaces = httpHost === '0.0.0.0' || httpHost === '::';
  const own = allInterfaces || httpHost === 'localhost' || httpHost.includes(':') ? [] : [httpHost];
  return { hosts: [...new Set(['127.0.0.1', ...own])], allInterfaces };
}

/** `sdp` with only the `a=candidate:` lines whose address (RFC 8839 §5.1, 5th field) is in `hosts`; unchanged when `allInterfaces`. */
export function advertisedCandidatesOnly(sdp: string, hosts: readonly string[], allInterfaces: boolean): string {
  if (allInterfaces) return sdp;
  return sdp
    .split('\r\n')
    .filter((l) => !l.startsWith('a=candidate:') || hosts.includes(l.split(' ')[4] ?? ''))
    .join('\r\n');
}

/**
 * Runs a signalling handler and answers its errors as the JSON envelope with the CORS headers (a
 * browser must see the status). An error that is not an ApiError is logged as `<what> request failed` and answered 500.
 */
export async function guardedSignalling(log: Logger, what: 'whep' | 'whip', req: RawBodyRequest, fn: () => Promise<RawReply> | RawReply): Promise<RawReply> {
  try {
    return await fn();
  } catch (e) {
    if (!(e instanceof ApiError)) {
      log.error(`${what} request failed`, { requestId: req.requestId, err: e instanceof Error ? e.stack : String(e) });
      e = internalError();
    }
    const err = e as ApiError;
    return {
      status: statusLine(err.status),
      headers: [...SIGNALLING_CORS, ['Content-Type', 'application/json; charset=utf-8'], ['Cache-Control', 'no-store'], ...Object.entries(err.headers)],
      body: Buffer.from(JSON.stringify(errorBody(err, req.requestId))),
    };
  }
}

/**
 * Counts a refused pending slot (`<what>_pending` or `<what>_pending_per_ip`) and throws the 429.
 * @throws ApiError 429 `too_many_pending_offers` with `Retry-After` (s, the offer timeout rounded up)
 */
export function refusePending(limits: Limits, what: 'whep' | 'whip', slot: 'total' | 'per_address', ip: string, streamId: string, offerTimeoutMs: number, message: string): never {
  limits.hit(slot === 'total' ? `${what}_pending` : `${what}_pending_per_ip`, ip, { streamId });
  throw new ApiError('too_many_pending_offers', message, { headers: { 'Retry-After': String(Math.max(1, Math.ceil(offerTimeoutMs / 1000))) } });
}

/**
 * Answers an offer on `pc` with every candidate gathered (no trickle, RFC 9725 §4.3): sets the
 * remote description, gives the audio transceiver `direction` (`setup` may adjust the others),
 * sets the local description, waits for gathering. Closes `pc` on any failure.
 * @returns the audio transceiver
 * @throws ApiError 400 `invalid_sdp` (no audio m-line, or werift cannot negotiate it), `ice_gathering_timeout` when gathering does not finish within `timeoutMs`
 */
export async function answerOffer(pc: RTCPeerConnection, sdp: string, direction: 'sendonly' | 'recvonly', timeoutMs: number, setup?: (audio: RTCRtpTransceiver) => void): Promise<RTCRtpTransceiver> {
  try {
    await pc.setRemoteDescription({ type: 'offer', sdp });
    const transceiver = pc.getTransceivers().find((t) => t.kind === 'audio');
    if (!transceiver) throw new ApiError('invalid_sdp', 'The offer has no audio m-line.');
    transceiver.setDirection(direction);
    setup?.(transceiver);
    await pc.setLocalDescription(await pc.createAnswer());
    if (!(await gathered(pc, timeoutMs))) throw new ApiError('ice_gathering_timeout', 'The server could not gather its ICE candidates in time; try again.');
    return transceiver;
  } catch (e) {
    pc.close().catch(() => {});
    if (e instanceof ApiError) throw e;
    throw new ApiError('invalid_sdp', `The offer could not be negotiated: ${(e as Error).message}`);
  }
}

/** What a watched session is told (`ConnectionWatch`). */
export interface WatchedSession {
  /** Still pending (answered, not connected). */
  pending(): boolean;
  /** Connected and serving (a `disconnected` then starts the grace period). */
  live(): boolean;
  /** The offer timeout passed while pending. */
  expired(): void;
  /** werift reported `connected` while pending. */
  connected(): void;
  close(reason: string): void;
  /** Any state change (after the above). */
  changed?(): void;
}

/**
 * The timers of one answered offer: the offer timeout (ms) until werift reports `connected`, and a
 * grace of DISCONNECTED_GRACE_MS for a connected peer that goes `disconnected`; `failed` or `closed`
 * close the session. `stop()` clears both timers (the session closes).
 */
export class ConnectionWatch {
  private offerTimer: NodeJS.Timeout | null;
  private graceTimer: NodeJS.Timeout | null = null;

  constructor(pc: RTCPeerConnection, offerTimeoutMs: number, s: WatchedSession) {
    this.offerTimer = setTimeout(() => {
      this.offerTimer = null;
      s.expired();
    }, offerTimeoutMs);
    this.offerTimer.unref();
    pc.connectionStateChange.subscribe((state) => {
      if (state === 'connected') {
        this.stop();
        if (s.pending()) s.connected();
      } else if (state === 'failed' || state === 'closed') s.close(`connection ${state}`);
      else if (state === 'disconnected' && !this.graceTimer && s.live()) {
        this.graceTimer = setTimeout(() => s.close('disconnected'), DISCONNECTED_GRACE_MS);
        this.graceTimer.unref();
      }
      s.changed?.();
    });
  }

  stop(): void {
    if (this.offerTimer) clearTimeout(this.offerTimer);
    if (this.graceTimer) clearTimeout(this.graceTimer);
    this.offerTimer = this.graceTimer = null;
  }
}

/**
 * Resolves true once ICE gathering of `pc` is complete (the answer then carries every candidate:
 * WHEP and WHIP answer without trickle, RFC 9725 §4.3), false after `timeoutMs` (ms).
 */
export function gathered(pc: RTCPeerConnection, timeoutMs: number): Promise<boolean> {
  if (pc.iceGatheringState === 'complete') return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      unSubscribe();
      resolve(false);
    }, timeoutMs);
    const { unSubscribe } = pc.iceGatheringStateChange.subscribe((s) => {
      if (s === 'complete') {
        clearTimeout(timer);
        unSubscribe();
        resolve(true);
      }
    });
  });
}
