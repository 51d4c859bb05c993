/**
 * The HTTP/1.0 front's native half (native/io/http_front.h, docs/http.md "HTTP/1.0"): hooks on the
 * HTTP server library's `accept4`/`recv` imports that frame requests with llhttp (docs/http.md
 * "Framing"), hand each connection whose first request line says HTTP/1.0 to `onConnection` (with
 * a socket descriptor it owns and the bytes already read), and cap the send buffer of connections
 * any of whose request-targets starts with one of `cappedPrefixes`; and hooks on its `getpeername`/`close` that answer a connection's peer
 * address from what `accept4` returned (docs/http.md "Client addresses without a system call"); and
 * hooks on its `send`/`writev`/`shutdown` that write a response's headers and body in one
 * `sendmsg` (docs/http.md "One write per response"); and a store of immutable media objects that
 * the hooks answer a plain GET from (docs/http.md "Media objects answered in native code"). Process-wide: the hooks serve every HTTP thread and every server in the
 * process; install once, on the main thread.
 */
import { loadedAddon } from './addon.js';

/** What the hooks did since the process started. */
export interface HttpFrontCounts {
  /** Connections handed to the HTTP/1.0 front. */
  http10: number;
  /** Connections whose send buffer was capped. */
  capped: number;
  /** First reads that held no whole request line (kept until it is, or handed on over 8 KiB). */
  incomplete: number;
  /** `getpeername` calls of the HTTP server answered from the address `accept4` returned (no system call). */
  peerHits: number;
  /** Writes that carried bytes the HTTP server had sent with MSG_MORE (its headers) together with its next write, in one sendmsg. */
  coalesced: number;
  /** Requests answered from the object store without the HTTP server (docs/http.md "Media objects answered in native code"). */
  objectHits: number;
  /** Stored answers the kernel took only part of (the connection was closed). */
  objectCut: number;
  /** Objects stored now. */
  objects: number;
  /** Requests the parser refused (RFC 9112 §5.1), answered 400 by the front and closed (docs/http.md "Framing"). */
  refused: number;
  /** Connections the idle sweep shut down: no byte either way for 10 s with nothing outstanding, or 60 s with an answer outstanding (docs/http.md "Idle connections"). */
  idleClosed: number;
  /** Whether the hooks the object store needs are installed (else stored objects are never answered natively). */
  objectsAnswered: boolean;
  /** Connections the HTTP server accepted and has not closed yet, every thread. */
  openConnections: number;
}

interface FrontAddon {
  installHttpFront(objectSuffix: string, cappedPrefixes: string[], sendBufferBytes: number, onConnection: (fd: number, head: Buffer) => void): string;
  httpFrontCounts(): HttpFrontCounts;
  setSendBuffer(fd: number, bytes: number): boolean;
  putHttpObject(path: string, head: Uint8Array, body: Uint8Array): boolean;
  deleteHttpObject(path: string): boolean;
  setHttpObjectsAnswering(on: boolean): void;
  putHeldReload(path: string, at: [number, number, number, number], heads: Uint8Array[], bodies: Uint8Array[]): boolean;
  deleteHeldReload(path: string, finalHead?: Uint8Array, finalBody?: Uint8Array): boolean;
  setHeldReloads(on: boolean, cells?: Int32Array, maxTotal?: number, maxPerAddress?: number): boolean;
  putHeldReloadCells(address: string, a: number, b: number): boolean;
  setHeldReloadListeners(count: Int32Array, max: number): boolean;
  drainHeldReloads(): { sessions: string[]; wanted: string[] };
  heldReloadCounts(): HeldReloadCounts;
  coalesceLoop(intervalUs: number, minConnections: number): void;
  loopCoalesceCounts(): LoopCoalesceCounts | null;
}

/** What the calling thread's wake-up coalescing did so far (`coalesceLoop`). */
export interface LoopCoalesceCounts {
  /** The loop's waits for its connections. */
  waits: number;
  /** Waits that a sleep preceded. */
  sleeps: number;
  /** Time slept in all (µs). */
  sleptUs: number;
}
const addon = loadedAddon as FrontAddon;

/**
 * Installs (or re-targets) the hooks in the loaded shared object whose path ends with
 * `objectSuffix`. `sendBufferBytes` 0 leaves send buffers as the kernel sizes them.
 * `onConnection` runs on this thread; it owns `fd` (it must close it).
 * @returns '' when installed, else the reason (the server then answers HTTP/1.1 only)
 * @throws TypeError on wrong arguments
 */
export function installHttpFront(objectSuffix: string, cappedPrefixes: string[], sendBufferBytes: number, onConnection: (fd: number, head: Buffer) => void): string {
  const reason = addon.installHttpFront(objectSuffix, cappedPrefixes, sendBufferBytes, onConnection);
  installOutcome = { object: objectSuffix, reason };
  return reason;
}

/**
 * Whether the hooks are in place in this process, and what they give (docs/http.md "HTTP/1.0"),
 * for the log of `serve` and for `/readyz`. The hooks check themselves when installed: a library
 * binary whose imports they cannot find (another build, another platform) leaves them out, and
 * the server answers without what depends on them.
 */
export interface HttpFrontStatus {
  /** The hooks on the library's `recv` and `accept4` are installed. */
  installed: boolean;
  /** Why not, when not installed: the install's own reason, or that it was not asked for. */
  reason?: string;
  /** The library binary the hooks were installed in (by path suffix), or null when not tried. */
  object: string | null;
  /** What depends on the hooks, each on or off in this process. */
  features: {
    /** HTTP/1.0 connections are handed to the HTTP/1.0 front (docs/http.md "HTTP/1.0"). */
    http10: boolean;
    /** `/listen/` connections get their capped kernel send buffer. */
    listenSendBuffer: boolean;
    /** Stored media objects are answered natively (docs/http.md "Media objects answered in native code"). */
    nativeObjects: boolean;
  };
}

/** The outcome of the one install of this process (null before it). */
let installOutcome: { object: string; reason: string } | null = null;

/** The hooks' status now (see `HttpFrontStatus`); cheap, callable any time. */
export function httpFrontStatus(): HttpFrontStatus {
  const installed = installOutcome !== null && installOutcome.reason === '';
  const status: HttpFrontStatus = {
    installed,
    object: installOutcome?.object ?? null,
    features: { http10: installed, listenSendBuffer: installed, nativeObjects: installed && addon.httpFrontCounts().objectsAnswered },
  };
  if (!installed) status.reason = installOutcome?.reason ?? 'not installed: HTTP/1.0 handling is off (--http10 false)';
  return status;
}

/** Counts of the hooks (tests, diagnostics). */
export function httpFrontCounts(): HttpFrontCounts {
  return addon.httpFrontCounts();
}

/**
 * Sets the kernel send buffer (SO_SNDBUF, bytes 1..2^30; Linux reports twice that) of a socket
 * this process owns by descriptor (a Node socket's `_handle.fd`).
 * @returns false when the kernel refused (not a socket, closed)
 * @throws TypeError on arguments out of range
 */
export function setSendBuffer(fd: number, bytes: number): boolean {
  return addon.setSendBuffer(fd, bytes);
}

/**
 * Stores the answer to a plain `GET path` of an immutable media object (docs/http.md "Media
 * objects answered in native code"): `head` is the status line and header fields (each ending in
 * CRLF) up to the request id's prefix (`X-Request-ID: req_…`); each answer adds the id's counter,
 * Date, Content-Length and a copy of `body`. Process-wide (every HTTP thread answers from it).
 * @returns false when `path` does not start with `/hls/` or 65,536 objects are stored
 * @throws TypeError on wrong arguments
 */
export function putHttpObject(path: string, head: Uint8Array, body: Uint8Array): boolean {
  return addon.putHttpObject(path, head, body);
}

/** Forgets the object at `path` (its requests reach the HTTP server again). @returns whether it was stored */
export function deleteHttpObject(path: string): boolean {
  return addon.deleteHttpObject(path);
}

/**
 * Turns answering from the object store on (the default) or off, process-wide, keeping what is
 * stored: off, every request reaches the HTTP server (the differential test,
 * test/integration/base/front-differential.test.ts, compares the answers both ways).
 * @throws TypeError on a non-boolean
 */
export function setHttpObjectsAnswering(on: boolean): void {
  addon.setHttpObjectsAnswering(on);
}

/** What the front did with blocking playlist reloads (docs/http.md "Blocking reloads held in native code"). */
export interface HeldReloadCounts {
  /** Answered with what they asked for: at once, or when the layer listed it. */
  hits: number;
  /** Held (each later answered, timed out, or ended by its client). */
  held: number;
  /** Answered when the wait ran out, or when their layer was withdrawn (`no-store`). */
  timeouts: number;
  /** Answers the kernel took only part of (the connection was closed). */
  cut: number;
  /** Holds ended by a read on their connection (the connection was closed). */
  broken: number;
  /** Held now. */
  waiting: number;
  /** Layers published now. */
  layers: number;
}

/** Where a public LL-HLS layer is (`Layer.reached`, rfc8216bis §6.2.5.2) and how long a reload waits. */
export interface HeldReloadState {
  /** Media sequence number of the segment in progress. */
  nextSequence: number;
  /** Its parts listed. */
  openParts: number;
  /** Parts of the segment before it (0 when none). */
  previousParts: number;
  /** A held reload's wait (ms, 1..60,000): 3 target durations. */
  timeoutMs: number;
}

/** A blocking reload the front answered or held, whose session the server must count. */
export interface HeldReloadSession {
  /** `/hls/<stream>/<layer>/index.m3u8`. */
  path: string;
  sid: string;
  /** The client's address (the connection's peer), as text. */
  address: string;
  /** '' when absent. */
  userAgent: string;
}

/**
 * Publishes (or replaces) a public LL-HLS layer's blocking reload answers (docs/http.md "Blocking
 * reloads held in native code"): `heads`/`bodies` are [reached playlist, reached delta update,
 * timed-out playlist, timed-out delta update], each head the status line and headers up to the
 * request id's prefix. Reloads held for this layer that it now reaches are answered during the call.
 * @returns false for a path not under `/hls/…/index.m3u8`, a timeout out of range, or 4,096 layers published
 * @throws TypeError on wrong arguments
 */
export function putHeldReload(path: string, at: HeldReloadState, heads: Uint8Array[], bodies: Uint8Array[]): boolean {
  return addon.putHeldReload(path, [at.nextSequence, at.openParts, at.previousParts, at.timeoutMs], heads, bodies);
}

/**
 * Withdraws a layer: its held reloads are answered with `final` (an ended layer's final playlist),
 * or without it as timed out; its later reloads reach the HTTP server. @returns whether it was published
 */
export function deleteHeldReload(path: string, final?: { head: Uint8Array; body: Uint8Array }): boolean {
  return final ? addon.deleteHeldReload(path, final.head, final.body) : addon.deleteHeldReload(path);
}

/**
 * Turns holding reloads in the front on or off (off until called), process-wide. `caps`: the
 * held-request counter's shared cells (src/delivery/listeners/shared-counter.ts; kept alive by the
 * front) and its caps; the front holds nothing before it has them.
 * @returns false when the cells were refused
 */
export function setHeldReloads(on: boolean, caps?: { cells: Int32Array; maxTotal: number; maxPerAddress: number }): boolean {
  return caps ? addon.setHeldReloads(on, caps.cells, caps.maxTotal, caps.maxPerAddress) : addon.setHeldReloads(on);
}

/**
 * Tells the front the node's listener count (`count[0]`, shared memory the listener registry
 * stores on every join and leave; kept alive by the front) and the most listeners it tracks: a
 * reload with a `sid` is answered by the front only while the count plus the sessions it has
 * queued stays below `max` (a new session over it is refused by the routes, `503
 * listener_capacity`), and none before this is called.
 * @returns false on a bad argument
 */
export function setHeldReloadListeners(count: Int32Array, max: number): boolean {
  return addon.setHeldReloadListeners(count, max);
}

/** Tells the front the two counter cells of `address`'s group (`SharedAddressCounter.cellsOf`). @returns false on a bad address or cell */
export function putHeldReloadCells(address: string, a: number, b: number): boolean {
  return addon.putHeldReloadCells(address, a, b);
}

/** The sessions of reloads answered or held since the last call, and the addresses whose cells the front wants. */
export function drainHeldReloads(): { sessions: HeldReloadSession[]; wanted: string[] } {
  const { sessions: flat, wanted } = addon.drainHeldReloads();
  const sessions: HeldReloadSession[] = [];
  for (let i = 0; i + 3 < flat.length; i += 4) sessions.push({ path: flat[i]!, sid: flat[i + 1]!, address: flat[i + 2]!, userAgent: flat[i + 3]! });
  return { sessions, wanted };
}

/** Counts of the held reloads (tests, diagnostics). */
export function heldReloadCounts(): HeldReloadCounts {
  return addon.heldReloadCounts();
}

/**
 * Fewer wake-ups of a busy HTTP thread (docs/http.md "Fewer wake-ups under load"): from now on the
 * calling thread's event loop goes to wait for its connections at most once per `intervalUs` µs
 * while at least `minConnections` HTTP connections are open (the front's count, every thread),
 * sleeping out the rest of the interval before a wait, so that one wake-up handles every
 * connection that became ready meanwhile. A loop with work pending never sleeps; a timer due
 * sooner shortens the sleep. Call again to change the settings; `intervalUs` 0 stops it.
 * @throws TypeError when `intervalUs` is outside 0–100,000 or `minConnections` outside 0–1e9
 */
export function coalesceLoop(intervalUs: number, minConnections: number): void {
  addon.coalesceLoop(intervalUs, minConnections);
}

/** The calling thread's coalescing counts, or null when `coalesceLoop` was never called on it. */
export function loopCoalesceCounts(): LoopCoalesceCounts | null {
  return addon.loopCoalesceCounts();
}
