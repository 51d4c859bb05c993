/**
 * A listener session (docs/behaviour.md §4, §10): the record the listener registry (registry.ts)
 * keeps per HLS session, WebRTC peer or progressive connection, its compact time fields, the
 * limits on what a node tracks, and the API's listener object of a session or a stored row
 * (docs/listeners.md).
 */
import type { ListenerRow } from '../../base/db/listeners-repo.js';
import type { ListenerObject, ListenerProtocol } from '../../base/listeners.js';

/**
 * Times of a session are kept as whole ms since this module loaded (`EPOCH`): small integers V8
 * stores in the object itself, where ms since 1970 (> 2^31) would each be a separate 16-byte number
 * (docs/benchmarks.md "Where a listener's memory goes"). After ~24 days they grow past that again:
 * still exact, only boxed.
 */
const EPOCH = Date.now();

/**
 * `ms` − EPOCH as a small integer where it fits: V8's interpreter boxes the difference of two
 * numbers that are not small integers (two times since 1970) in a new 16-byte number even when
 * it is whole; `Math.floor` gives back a small integer.
 */
const rel = (ms: number): number => Math.floor(ms - EPOCH);

/** `Session` protocols by their index in its `bits`. */
const PROTOCOLS: readonly ListenerProtocol[] = ['hls', 'webrtc', 'icecast'];
/** `Session.bits`: the protocol's index (bits 0–1), LEFT, and from bit TIMEOUT_SHIFT up the timeout (ms). */
const PROTOCOL_MASK = 3;
const LEFT = 4;
const TIMEOUT_SHIFT = 3;
/** Largest session timeout kept (ms, ~37 h): the bits stay a small integer. */
export const TIMEOUT_MAX_MS = 2 ** 27 - 1;

/** The stream a session listens to and the account that owns it: one object shared by the stream's sessions. */
export interface SessionStream {
  /** The stream's id (an own copy). */
  readonly id: string;
  readonly accountId: string;
}

/**
 * One live listener. Times in ms since the epoch (read through accessors). One object per
 * session whose strings are its own (never a slice of a request's query string or headers) and
 * shared where they repeat (country, user agent, the stream and its account). A session nobody
 * looks up by a key of its own (a progressive connection) is found by its listener id (`key` is
 * `id`); one with a key (an HLS `sid`, a token subject, a WebRTC peer id) is a `KeyedSession`.
 * Protocol, `left` and the timeout share one small integer: every field is 8 bytes per listener
 * (docs/bench/listener-memory.md).
 */
export class Session {
  /** `connectedAt` − EPOCH. */
  private readonly connected: number;
  /** `lastSeenAt` − EPOCH. */
  private seenRel: number;
  /** `persistedSeenAt` − EPOCH. */
  private persistedRel: number;
  /** The protocol's index in PROTOCOLS, LEFT, and the timeout. */
  private bits: number;

  /**
   * `timeoutMs`: HLS: inactivity after which the session leaves (ms, rounded up to a whole ms, at
   * most TIMEOUT_MAX_MS); 0 = only an explicit `leave` ends it.
   */
  constructor(
    readonly id: string,
    /** Its stream and the stream's account. */
    readonly stream: SessionStream,
    protocol: ListenerProtocol,
    readonly country: string | null,
    readonly userAgent: string | null,
    now: number,
    timeoutMs: number,
    /** Join order (pagination cursor within the stream). */
    readonly order: number,
  ) {
    this.connected = this.seenRel = this.persistedRel = rel(now);
    const timeout = Math.min(TIMEOUT_MAX_MS, Math.max(0, Math.ceil(timeoutMs)) || 0);
    this.bits = PROTOCOLS.indexOf(protocol) | (timeout << TIMEOUT_SHIFT);
  }

  get streamId(): string {
    return this.stream.id;
  }

  get accountId(): string {
    return this.stream.accountId;
  }

  /** HLS: inactivity after which the session leaves (ms); 0 = only an explicit `leave` ends it. */
  get timeoutMs(): number {
    return this.bits >>> TIMEOUT_SHIFT;
  }

  /** What the session is found by: its listener id (a `KeyedSession` has a key of its own). */
  get key(): string {
    return this.id;
  }

  get protocol(): ListenerProtocol {
    return PROTOCOLS[this.bits & PROTOCOL_MASK]!;
  }

  /** The session ended (its `listener.left` is on its way). */
  get left(): boolean {
    return (this.bits & LEFT) !== 0;
  }

  set left(v: boolean) {
    this.bits = v ? this.bits | LEFT : this.bits & ~LEFT;
  }

  get connectedAt(): number {
    return this.connected + EPOCH;
  }

  get lastSeenAt(): number {
    return this.seenRel + EPOCH;
  }

  set lastSeenAt(ms: number) {
    this.seenRel = rel(ms);
  }

  /** Last-seen value already written to SQLite. */
  get persistedSeenAt(): number {
    return this.persistedRel + EPOCH;
  }

  set persistedSeenAt(ms: number) {
    this.persistedRel = rel(ms);
  }
}

/** A session found by a key of its own (an HLS `sid`, a listener token's subject, a WebRTC peer id). */
export class KeyedSession extends Session {
  constructor(
    private readonly ownKey: string,
    ...rest: ConstructorParameters<typeof Session>
  ) {
    super(...rest);
  }

  override get key(): string {
    return this.ownKey;
  }
}

/** Who joins: the parts of a session the caller knows. */
export interface JoinInfo {
  streamId: string;
  accountId: string;
  /**
   * What the session is found by (`touch`, a repeated `join`); '' for a session nobody looks up
   * by key (a progressive connection): its listener id is then its key, one string for both.
   */
  key: string;
  protocol: ListenerProtocol;
  country: string | null;
  userAgent: string | null;
  timeoutMs: number;
  /** A listener of the catch-up playlists (docs/behaviour.md §17); absent: live. */
  mode?: 'live' | 'catch_up' | undefined;
}

/** Largest user agent kept (characters): bounds memory per listener. */
export const USER_AGENT_MAX = 256;
/** Listeners a node tracks at most; beyond, new sessions are refused (503) instead of growing memory. */
export const MAX_LISTENERS = 200_000;

/**
 * `s` copied into a flat string of its own (UTF-16 code units kept exactly): a slice of a
 * request's query string or headers, or a string built piece by piece, would keep more alive.
 */
export function ownString(s: string): string {
  return s.length === 0 ? '' : Buffer.from(s, 'utf16le').toString('utf16le');
}

/** Thrown by `ListenerRegistry.join` when the node already tracks MAX_LISTENERS. */
export class TooManyListenersError extends Error {}

const iso = (ms: number) => new Date(ms).toISOString();

/** The sessions of catch-up listeners (a set beside the sessions: a live session carries nothing more). */
const catchUpSessions = new WeakSet<Session>();

/** Marks `s` as a listener of the catch-up playlists (docs/behaviour.md §17). */
export function markCatchUp(s: Session): void {
  catchUpSessions.add(s);
}

/** A session's `mode`: `catch_up` when marked by `markCatchUp`, else `live`. */
export const modeOf = (s: Session): 'live' | 'catch_up' => (catchUpSessions.has(s) ? 'catch_up' : 'live');

/** The API's listener object of a live session, as last seen at `lastSeenAt` (ms since 1970). */
export function sessionObject(s: Session, lastSeenAt: number): ListenerObject {
  return {
    id: s.id,
    object: 'listener',
    streamId: s.streamId,
    protocol: s.protocol,
    country: s.country,
    connectedAt: iso(s.connectedAt),
    lastSeenAt: iso(lastSeenAt),
    durationSeconds: Math.max(0, Math.round((lastSeenAt - s.connectedAt) / 1000)),
    userAgent: s.userAgent,
    mode: modeOf(s),
  };
}

/** The API's listener object of a stored session row, as last seen at `lastSeenAt` (ms since 1970). */
export function rowObject(r: ListenerRow, lastSeenAt: number): ListenerObject {
  return {
    id: r.id,
    object: 'listener',
    streamId: r.stream_id,
    protocol: r.protocol,
    country: r.country,
    connectedAt: iso(r.connected_at),
    lastSeenAt: iso(lastSeenAt),
    durationSeconds: Math.max(0, Math.round((lastSeenAt - r.connected_at) / 1000)),
    userAgent: r.user_agent,
    mode: r.mode ?? 'live',
  };
}