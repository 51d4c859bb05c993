/**
 * Answers, for a peer in the native fan-out (src/delivery/webrtc/fanout.ts) and a WHIP publisher
 * received natively (./rtp-receive-native.ts), the ICE connectivity checks its remote keeps
 * sending on the nominated pair after connecting (consent freshness, RFC 7675 §5.1; RFC 8445
 * §7.3), instead of werift's per-request machinery (a parsed message
 * object, a role check, a response object, a triggered-check lookup and a transaction id kept for
 * good per request). Everything else on the socket goes on to werift unchanged: DTLS, SRTCP, STUN
 * responses to werift's own consent checks, and every request this does not answer.
 *
 * A datagram is answered here only when it is exactly a STUN Binding request (RFC 8489 §5: top two
 * bits zero, the magic cookie, a length that matches) from the nominated pair's remote address
 * (from any remote address with `anySource`, answered to its source), whose USERNAME is
 * `<our ufrag>:<their ufrag>` (RFC 8445 §7.2.2), whose MESSAGE-INTEGRITY is the HMAC-SHA1 of the
 * message under our ICE password (RFC 8489 §14.5, short-term credentials), whose FINGERPRINT, when present, is the CRC-32 of the message XOR 0x5354554E (§14.7), that carries no
 * USE-CANDIDATE (a nomination, werift's), no role attribute equal to our own role (a role
 * conflict, RFC 8445 §7.3.1.1, werift's) and no other comprehension-required attribute than
 * USERNAME, MESSAGE-INTEGRITY, PRIORITY and the role (RFC 8489 §7.3.1). The answer is a Binding
 * success response with XOR-MAPPED-ADDRESS (§14.2), MESSAGE-INTEGRITY and FINGERPRINT, as werift
 * would send, from the same socket.
 */
import type { RemoteInfo, Socket } from 'node:dgram';
import { createHmac, timingSafeEqual } from 'node:crypto';
import { crc32 } from 'node:zlib';

/** The parts of werift's ICE agent (werift 0.24 `ice/src/ice` Connection) the responder reads. */
export interface IceCredentials {
  localUsername: string;
  localPassword: string;
  remoteUsername: string;
  iceControlling: boolean;
}

const MAGIC = 0x2112a442;
const BINDING_REQUEST = 0x0001;
const BINDING_SUCCESS = 0x0101;
const A_USERNAME = 0x0006;
const A_INTEGRITY = 0x0008;
const A_XOR_MAPPED = 0x0020;
const A_PRIORITY = 0x0024;
const A_USE_CANDIDATE = 0x0025;
const A_FINGERPRINT = 0x8028;
const A_CONTROLLED = 0x8029;
const A_CONTROLLING = 0x802a;
const FINGERPRINT_XOR = 0x5354554e;

type Listener = (msg: Buffer, rinfo: RemoteInfo) => void;

/** Whether `d` is a Binding request this responder answers (see the file's comment); else werift gets it. */
function verify(d: Buffer, ice: IceCredentials): boolean {
  if (d.length < 20 || d.length > 1500 || (d[0]! & 0xc0) !== 0 || d.readUInt16BE(0) !== BINDING_REQUEST) return false;
  if (d.readUInt32BE(4) !== MAGIC || d.readUInt16BE(2) + 20 !== d.length) return false;
  let username: Buffer | null = null;
  let integrityAt = -1;
  let fingerprintAt = -1;
  for (let at = 20; at < d.length; ) {
    if (fingerprintAt >= 0 || at + 4 > d.length) return false; // FINGERPRINT comes last
    const type = d.readUInt16BE(at);
    const len = d.readUInt16BE(at + 2);
    const next = at + 4 + ((len + 3) & ~3);
    if (next > d.length || (integrityAt >= 0 && type !== A_FINGERPRINT)) return false; // only FINGERPRINT follows MESSAGE-INTEGRITY
    if (type === A_USERNAME) username = d.subarray(at + 4, at + 4 + len);
    else if (type === A_INTEGRITY) {
      if (len !== 20) return false;
      integrityAt = at;
    } else if (type === A_FINGERPRINT) {
      if (len !== 4) return false;
      fingerprintAt = at;
    } else if (type === A_USE_CANDIDATE || type === (ice.iceControlling ? A_CONTROLLING : A_CONTROLLED)) return false;
    else if (type < 0x8000 && type !== A_PRIORITY) return false;
    at = next;
  }
  if (integrityAt < 0 || !username || username.toString('utf8') !== `${ice.localUsername}:${ice.remoteUsername}`) return false;
  if (fingerprintAt >= 0) {
    const copy = Buffer.from(d.subarray(0, fingerprintAt));
    copy.writeUInt16BE(fingerprintAt + 8 - 20, 2);
    if (((crc32(copy) ^ FINGERPRINT_XOR) >>> 0) !== d.readUInt32BE(fingerprintAt + 4)) return false;
  }
  const signed = Buffer.from(d.subarray(0, integrityAt));
  signed.writeUInt16BE(integrityAt + 24 - 20, 2);
  const mac = createHmac('sha1', ice.localPassword).update(signed).digest();
  return timingSafeEqual(mac, d.subarray(integrityAt + 4, integrityAt + 24));
}

/** The Binding success response to request `req` from `host:port` (XOR-MAPPED-ADDRESS, MESSAGE-INTEGRITY, FINGERPRINT). */
export function bindingSuccess(req: Buffer, host: string, port: number, password: string): Buffer {
  const v6 = host.includes(':');
  const addrLen = v6 ? 16 : 4;
  const b = Buffer.alloc(20 + 4 + 4 + addrLen + 24 + 8);
  b.writeUInt16BE(BINDING_SUCCESS, 0);
  req.copy(b, 4, 4, 20); // magic cookie and transaction id
  let at = 20;
  b.writeUInt16BE(A_XOR_MAPPED, at);
  b.writeUInt16BE(4 + addrLen, at + 2);
  b[at + 5] = v6 ? 0x02 : 0x01;
  b.writeUInt16BE(port ^ (MAGIC >>> 16), at + 6);
  const raw = v6 ? ipv6Bytes(host) : Buffer.from(host.split('.').map(Number));
  for (let i = 0; i < addrLen; i++) b[at + 8 + i] = raw[i]! ^ b[4 + i]!; // cookie, then transaction id (RFC 8489 §14.2)
  at += 8 + addrLen;
  b.writeUInt16BE(at + 24 - 20, 2);
  const mac = createHmac('sha1', password).update(b.subarray(0, at)).digest();
  b.writeUInt16BE(A_INTEGRITY, at);
  b.writeUInt16BE(20, at + 2);
  mac.copy(b, at + 4);
  at += 24;
  b.writeUInt16BE(at + 8 - 20, 2);
  const fp = (crc32(b.subarray(0, at)) ^ FINGERPRINT_XOR) >>> 0;
  b.writeUInt16BE(A_FINGERPRINT, at);
  b.writeUInt16BE(4, at + 2);
  b.writeUInt32BE(fp, at + 4);
  return b;
}

/** The 16 bytes of an IPv6 literal (`::` expanded; an embedded IPv4 tail as its 4 bytes). */
function ipv6Bytes(host: string): Buffer {
  const h = host.split('%')[0]!;
  const v4 = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(h);
  const head = v4 ? h.slice(0, v4.index) + '0:0' : h;
  const [l, r = ''] = head.split('::');
  const left = l ? l.split(':') : [];
  const right = r ? r.split(':') : [];
  const groups = head.includes('::') ? [...left, ...Array(8 - left.length - right.length).fill('0'), ...right] : left;
  const out = Buffer.alloc(16);
  groups.forEach((g, i) => out.writeUInt16BE(parseInt(g, 16) & 0xffff, i * 2));
  if (v4) for (let i = 0; i < 4; i++) out[12 + i] = Number(v4[i + 1]);
  return out;
}

/**
 * One fan-out peer's responder: installed in front of werift's `message` listener of the
 * nominated pair's socket, removed (werift's listener put back) by `remove`.
 */
export class StunResponder {
  /** Binding requests answered here. */
  answered = 0;
  /**
   * Looks first at every datagram this does not answer: true when it took it (werift does not get
   * it). Set by the owner: the answers to its own consent checks (./consent.ts), SRTCP it reads
   * or ignores.
   */
  intercept: ((msg: Buffer, rinfo: RemoteInfo) => boolean) | null = null;
  private readonly theirs: Listener[];
  private readonly mine: Listener;

  /**
   * @param socket the nominated pair's UDP socket (werift's); @param host, port its remote address
   * @param ice werift's ICE agent, read per request (its role and credentials may change)
   * @param anySource answer an authenticated request from any remote address on this socket (the
   *   answer goes to the request's source), not only the nominated pair's: a controlling werift
   *   peer may send its consent checks on a pair other than the one this side nominated
   */
  constructor(
    private readonly socket: Socket,
    readonly host: string,
    readonly port: number,
    ice: IceCredentials,
    anySource = false,
  ) {
    this.theirs = socket.listeners('message') as Listener[];
    this.mine = (d, rinfo) => {
      if (d.length >= 20 && d[0]! < 2 && (anySource || (rinfo.port === port && rinfo.address === host)) && verify(d, ice)) {
        this.answered++;
        socket.send(bindingSuccess(d, rinfo.address, rinfo.port, ice.localPassword), rinfo.port, rinfo.address);
        return;
      }
      if (this.intercept?.(d, rinfo)) return;
      for (const l of this.theirs) l.call(socket, d, rinfo);
    };
    socket.removeAllListeners('message');
    socket.on('message', this.mine);
  }

  /**
   * A responder on the pair `path` of werift's ICE agent `ice` (see the constructor); null when
   * `ice` lacks the ICE credentials it reads.
   */
  static forAgent(ice: unknown, path: { socket: Socket; host: string; port: number }, anySource = false): StunResponder | null {
    const c = ice as Partial<IceCredentials>;
    if (typeof c.localUsername !== 'string' || typeof c.localPassword !== 'string' || typeof c.remoteUsername !== 'string' || typeof c.iceControlling !== 'boolean') return null;
    return new StunResponder(path.socket, path.host, path.port, c as IceCredentials, anySource);
  }

  /** werift's listeners back on the socket, this one off (idempotent). */
  remove(): void {
    if (!this.socket.listeners('message').includes(this.mine)) return;
    this.socket.off('message', this.mine);
    for (const l of this.theirs) this.socket.on('message', l);
  }
}
