/**
 * Consent freshness (RFC 7675) for a WHIP publisher received natively (./rtp-receive-native.ts)
 * and for a WHEP peer in the native fan-out (./fanout.ts), in place of werift's loop: the receiver
 * reports and the media the server sends are data on the pair, so consent to send them is checked
 * as werift would — a STUN Binding request to the nominated pair's
 * remote address every 4–6 s (§5.1: 0.8–1.2 × 5 s, randomised), and consent expires when no
 * authenticated success response came for 30 s (§5.1); then `expired` is called (the publish
 * ends). One timer and one request buffer per peer instead of werift's per-check promises, abort
 * controllers and transaction objects.
 *
 * The request (RFC 8489 §5, RFC 8445 §7.2.2): USERNAME `<their ufrag>:<our ufrag>`, PRIORITY (a
 * peer-reflexive candidate's, §5.1.2.1), ICE-CONTROLLED or ICE-CONTROLLING with our tie-breaker,
 * MESSAGE-INTEGRITY under their ICE password (§14.5), FINGERPRINT (§14.7). A response counts only
 * when it is a Binding success response to the request in flight (its transaction ID), from the
 * address it was sent to, whose MESSAGE-INTEGRITY checks under their password (RFC 8489 §6.3.3).
 */
import type { RemoteInfo, Socket } from 'node:dgram';
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { crc32 } from 'node:zlib';

/** What the checks read of werift's ICE agent (werift 0.24 `ice/src/ice` Connection). */
export interface ConsentCredentials {
  localUsername: string;
  remoteUsername: string;
  remotePassword: string;
  iceControlling: boolean;
  tieBreaker: bigint;
}

const MAGIC = 0x2112a442;
const A_USERNAME = 0x0006;
const A_INTEGRITY = 0x0008;
const A_PRIORITY = 0x0024;
const A_FINGERPRINT = 0x8028;
const A_CONTROLLED = 0x8029;
const A_CONTROLLING = 0x802a;
/** RFC 8445 §5.1.2.1: peer-reflexive type preference 110, local preference 65535, component 1. */
const PRFLX_PRIORITY = 110 * 2 ** 24 + 65535 * 2 ** 8 + 255;
const INTERVAL_MS = 5000;
const TIMEOUT_MS = 30_000;

/** One STUN attribute (type, length, value padded to 4 bytes). */
function attr(type: number, value: Buffer): Buffer {
  const b = Buffer.alloc(4 + ((value.length + 3) & ~3));
  b.writeUInt16BE(type, 0);
  b.writeUInt16BE(value.length, 2);
  value.copy(b, 4);
  return b;
}

/** A Binding request with transaction ID `tx` for `ice` (see the file's comment). */
export function consentRequest(tx: Buffer, ice: ConsentCredentials): Buffer {
  const priority = Buffer.alloc(4);
  priority.writeUInt32BE(PRFLX_PRIORITY);
  const tie = Buffer.alloc(8);
  tie.writeBigUInt64BE(BigInt.asUintN(64, ice.tieBreaker));
  const body = Buffer.concat([
    attr(A_USERNAME, Buffer.from(`${ice.remoteUsername}:${ice.localUsername}`, 'utf8')),
    attr(A_PRIORITY, priority),
    attr(ice.iceControlling ? A_CONTROLLING : A_CONTROLLED, tie),
  ]);
  const b = Buffer.alloc(20 + body.length + 24 + 8);
  b.writeUInt16BE(0x0001, 0);
  b.writeUInt32BE(MAGIC, 4);
  tx.copy(b, 8);
  body.copy(b, 20);
  let at = 20 + body.length;
  b.writeUInt16BE(at + 24 - 20, 2);
  const mac = createHmac('sha1', ice.remotePassword).update(b.subarray(0, at)).digest();
  b.writeUInt16BE(A_INTEGRITY, at);
  b.writeUInt16BE(20, at + 2);
  mac.copy(b, at + 4);
  at += 24;
  b.writeUInt16BE(at + 8 - 20, 2);
  b.writeUInt16BE(A_FINGERPRINT, at);
  b.writeUInt16BE(4, at + 2);
  b.writeUInt32BE((crc32(b.subarray(0, at)) ^ 0x5354554e) >>> 0, at + 4);
  return b;
}

/** Whether `d` is a Binding success response to `tx` whose MESSAGE-INTEGRITY checks under `password`. */
export function isConsentResponse(d: Buffer, tx: Buffer, password: string): boolean {
  if (d.length < 20 + 24 || d.readUInt16BE(0) !== 0x0101 || d.readUInt32BE(4) !== MAGIC || d.readUInt16BE(2) + 20 !== d.length) return false;
  if (!d.subarray(8, 20).equals(tx)) return false;
  for (let at = 20; at + 4 <= d.length; ) {
    const type = d.readUInt16BE(at);
    const len = d.readUInt16BE(at + 2);
    if (type === A_INTEGRITY) {
      if (len !== 20 || at + 24 > d.length) return false;
      const signed = Buffer.from(d.subarray(0, at));
      signed.writeUInt16BE(at + 24 - 20, 2);
      return timingSafeEqual(createHmac('sha1', password).update(signed).digest(), d.subarray(at + 4, at + 24));
    }
    at += 4 + ((len + 3) & ~3);
  }
  return false;
}

/** werift 0.24's consent loop on its ICE agent (RFC 7675), stopped while ConsentChecks run. */
interface WeriftConsent {
  stopConsentLifecycle(): void;
  queryConsent(): void;
  consentFresh: boolean;
}

/** Consent taken over from werift: our checks, and `restore` to start werift's loop again. */
export interface TakenConsent {
  checks: ConsentChecks;
  restore(): void;
}

/**
 * Our consent checks on the pair `path` of werift's ICE agent `ice`, in place of its loop: werift's
 * loop is stopped and its `consentFresh` kept true meanwhile (what `canSendApplicationData()`
 * reads), false once ours expire (then `expired` is called). `restore` gives werift its loop back
 * (a peer that stays connected without these checks). Null when `ice` lacks the shape relied on.
 */
export function takeOverConsent(ice: unknown, path: { socket: Socket; host: string; port: number }, expired: () => void): TakenConsent | null {
  const c = ice as Partial<ConsentCredentials> & Partial<WeriftConsent>;
  if (typeof c.localUsername !== 'string' || typeof c.remoteUsername !== 'string' || typeof c.remotePassword !== 'string' || !c.remotePassword) return null;
  if (typeof c.iceControlling !== 'boolean' || typeof c.tieBreaker !== 'bigint' || typeof c.stopConsentLifecycle !== 'function' || typeof c.queryConsent !== 'function') return null;
  const w = c as WeriftConsent;
  w.stopConsentLifecycle();
  w.consentFresh = true;
  const checks = new ConsentChecks(path.socket, path.host, path.port, c as ConsentCredentials, () => {
    w.consentFresh = false;
    expired();
  });
  return { checks, restore: () => w.queryConsent() };
}

/** One peer's consent checks; `close` stops them. */
export class ConsentChecks {
  /** Requests sent, and authenticated responses to them. */
  sent = 0;
  fresh = 0;
  private tx: Buffer | null = null;
  private lastFresh = performance.now();
  private timer: NodeJS.Timeout | null = null;
  private closed = false;

  /**
   * @param socket the nominated pair's socket; @param host, port its remote address
   * @param ice werift's ICE agent (read per request: its credentials and role may change)
   * @param expired called once when consent has expired (RFC 7675 §5.1); the checks stop
   */
  constructor(
    private readonly socket: Socket,
    private readonly host: string,
    private readonly port: number,
    private readonly ice: ConsentCredentials,
    private readonly expired: () => void,
  ) {
    this.schedule();
  }

  /** A datagram on the socket: true when it was the response to the request in flight (taken here). */
  take(d: Buffer, rinfo: RemoteInfo): boolean {
    if (!this.tx || d.length < 20 || d[0] !== 0x01 || d[1] !== 0x01 || rinfo.port !== this.port || rinfo.address !== this.host) return false;
    if (!isConsentResponse(d, this.tx, this.ice.remotePassword)) return false;
    this.tx = null;
    this.fresh++;
    this.lastFresh = performance.now();
    return true;
  }

  /** Stops the checks (idempotent). */
  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  private schedule(): void {
    this.timer = setTimeout(() => this.check(), INTERVAL_MS * (0.8 + 0.4 * Math.random()));
    this.timer.unref();
  }

  private check(): void {
    this.timer = null;
    if (this.closed) return;
    if (performance.now() - this.lastFresh > TIMEOUT_MS) {
      this.close();
      this.expired();
      return;
    }
    this.tx = randomBytes(12);
    this.sent++;
    this.socket.send(consentRequest(this.tx, this.ice), this.port, this.host);
    this.schedule();
  }
}
