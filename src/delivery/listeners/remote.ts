/**
 * Listener sessions seen by worker threads, reported to the main thread's registry in batches
 * (docs/scaling.md "Sessions"), so that `/listeners`, `/stats`, `listener.*` events and counts stay
 * the node's, whichever thread served a request.
 *
 * - Worker side, `RemoteSessions` (implements `HlsSessions` for src/delivery/listeners/hls-access.ts, and
 *   the progressive listeners of src/delivery/progressive/): each session the worker knows gets a small integer
 *   handle. A new one is reported at once (at the next turn of the event loop, with the client
 *   address for its country and the user agent); after that only its handle and when it was last
 *   seen, every BATCH_MS (250 ms) — in typed arrays, whatever the request rate. A progressive
 *   connection's close is reported at once. The node's listener count is read from the
 *   registry's shared cell, so a worker refuses new sessions at MAX_LISTENERS like the main thread.
 * - Main side, `SessionIntake`: joins (country looked up here, once), last-seen times (`seen`),
 *   leaves. When a session leaves the registry (timeout, or a progressive close), every worker
 *   that holds a handle for it is told to forget it; its next request joins a new session, as on
 *   the main thread. A worker that stopped or crashed has its progressive sessions left.
 *
 * A session's last-seen time reaches the registry up to BATCH_MS after the request; expiry is 3
 * target durations (≥ 3 s), so the count and the `listener.left` events are unchanged by it.
 */
import { countryOf } from '../../base/geo.js';
import type { HlsJoin, HlsSessions } from './hls-access.js';
import type { ListenerRegistry } from './registry.js';
import { MAX_LISTENERS, TooManyListenersError, type Session } from './session.js';

/** How often a worker reports last-seen times (ms). */
export const BATCH_MS = 250;

/** A session new to a worker thread. */
export interface JoinNote {
  h: number;
  streamId: string;
  accountId: string;
  key: string;
  protocol: 'hls' | 'icecast';
  /** The client address (for its country; not kept). */
  ip: string;
  userAgent: string | null;
  /** HLS: inactivity after which the session leaves (ms); 0: progressive (leaves on close). */
  timeoutMs: number;
  /** HLS: the key is a minted session id (capped per address per minute, `ListenerRegistry.admitHls`). */
  minted?: boolean | undefined;
}

/** What a worker thread reports. `seen[i]` was last seen at `seenAt[i]` (ms since the epoch). */
export interface SessionBatch {
  joins: JoinNote[];
  seen: Int32Array;
  seenAt: Float64Array;
  /** Progressive connections that closed. */
  leaves: Int32Array;
}

/** A worker thread's sessions, reported to the main thread through `send`. */
export class RemoteSessions implements HlsSessions {
  /** HLS sessions by stream, then key (sid or token subject). */
  private readonly keys = new Map<string, Map<string, number>>();
  /** Every live handle: its stream and key. */
  private readonly handles = new Map<number, { streamId: string; key: string }>();
  private next = 1;
  private joins: JoinNote[] = [];
  private seen = new Map<number, number>();
  private leaves: number[] = [];
  private soon: NodeJS.Immediate | null = null;
  private later: NodeJS.Timeout | null = null;

  /**
   * @param send posts a batch to the main thread
   * @param countCell the registry's shared listener count (`ListenerRegistry.countCell`)
   */
  constructor(
    private readonly send: (b: SessionBatch) => void,
    private readonly countCell: Int32Array,
    private readonly now: () => number = Date.now,
  ) {}

  touch(streamId: string, key: string): boolean {
    const h = this.keys.get(streamId)?.get(key);
    if (h === undefined) return false;
    this.seenNow(h);
    return true;
  }

  join(j: HlsJoin): void {
    this.checkRoom();
    let byKey = this.keys.get(j.streamId);
    if (!byKey) this.keys.set(j.streamId, (byKey = new Map()));
    const h = this.next++;
    byKey.set(j.key, h);
    this.handles.set(h, { streamId: j.streamId, key: j.key });
    this.joins.push({ h, streamId: j.streamId, accountId: j.accountId, key: j.key, protocol: 'hls', ip: j.ip, userAgent: j.userAgent, timeoutMs: j.timeoutMs, minted: j.minted === true });
    this.flushSoon();
  }

  /**
   * A progressive connection opened: a new session (`key` unique to it). Returns its handle.
   * @throws TooManyListenersError when the node tracks MAX_LISTENERS
   */
  open(j: { streamId: string; accountId: string; key: string; ip: string; userAgent: string | null }): number {
    this.checkRoom();
    const h = this.next++;
    this.handles.set(h, { streamId: j.streamId, key: j.key });
    this.joins.push({ h, ...j, protocol: 'icecast', timeoutMs: 0 });
    this.flushSoon();
    return h;
  }

  /** A progressive listener took audio. */
  seenNow(h: number): void {
    if (this.seen.size === 0) this.flushLater();
    this.seen.set(h, this.now());
  }

  /** A progressive connection closed. */
  close(h: number): void {
    if (!this.handles.delete(h)) return;
    this.seen.delete(h);
    this.leaves.push(h);
    this.flushSoon();
  }

  /** The main thread says these sessions left: a later request joins anew. */
  forget(handles: ArrayLike<number>): void {
    for (let i = 0; i < handles.length; i++) {
      const h = handles[i]!;
      const s = this.handles.get(h);
      if (!s) continue;
      this.handles.delete(h);
      this.seen.delete(h);
      const byKey = this.keys.get(s.streamId);
      if (byKey?.get(s.key) === h) {
        byKey.delete(s.key);
        if (byKey.size === 0) this.keys.delete(s.streamId);
      }
    }
  }

  /** Sessions known here (tests, diagnostics). */
  get size(): number {
    return this.handles.size;
  }

  /** Sends what is pending now (also at shutdown). */
  flush(): void {
    if (this.soon) clearImmediate(this.soon);
    if (this.later) clearTimeout(this.later);
    this.soon = null;
    this.later = null;
    if (this.joins.length === 0 && this.seen.size === 0 && this.leaves.length === 0) return;
    const seen = new Int32Array(this.seen.size);
    const seenAt = new Float64Array(this.seen.size);
    let i = 0;
    for (const [h, at] of this.seen) {
      seen[i] = h;
      seenAt[i++] = at;
    }
    const b: SessionBatch = { joins: this.joins, seen, seenAt, leaves: Int32Array.from(this.leaves) };
    this.joins = [];
    this.seen = new Map();
    this.leaves = [];
    this.send(b);
  }

  private checkRoom(): void {
    if (Atomics.load(this.countCell, 0) >= MAX_LISTENERS) throw new TooManyListenersError(`this node tracks ${MAX_LISTENERS} listeners already`);
  }

  private flushSoon(): void {
    if (this.soon) return;
    this.soon = setImmediate(() => {
      this.soon = null;
      this.flush();
    });
    this.soon.unref();
  }

  private flushLater(): void {
    if (this.later) return;
    this.later = setTimeout(() => {
      this.later = null;
      this.flush();
    }, BATCH_MS);
    this.later.unref();
  }
}

interface Entry {
  session: Session | null;
}

/** The main thread's intake of the worker threads' batches. */
export class SessionIntake {
  /** Per worker thread: its handles. */
  private readonly workers = new Map<number, Map<number, Entry>>();
  /** Per session: the worker handles that stand for it (told to forget it when it leaves). */
  private readonly bySession = new Map<Session, Array<[number, number]>>();
  private readonly offLeave: () => void;
  /** Handles to forget, per worker, sent at the next turn of the event loop (a mass expiry is one message per worker). */
  private forgetting = new Map<number, number[]>();
  private forgetSoon: NodeJS.Immediate | null = null;

  /**
   * @param forget tells worker `worker` to forget `handles` (their sessions left)
   */
  constructor(
    private readonly registry: ListenerRegistry,
    private readonly forget: (worker: number, handles: Int32Array) => void,
  ) {
    this.offLeave = registry.onLeave((s) => this.left(s));
  }

  /** Takes worker `worker`'s batch: joins first, then last-seen times, then closes. */
  take(worker: number, b: SessionBatch): void {
    let table = this.workers.get(worker);
    if (!table) this.workers.set(worker, (table = new Map()));
    for (const j of b.joins) {
      let session: Session | null = null;
      // A minted session id new to the node counts against its address's session rate.
      const admitted = !j.minted || this.registry.touch(j.streamId, j.key) || this.registry.admitHls(j.ip);
      try {
        if (admitted) session = this.registry.join({ streamId: j.streamId, accountId: j.accountId, key: j.key, protocol: j.protocol, country: countryOf(j.ip), userAgent: j.userAgent, timeoutMs: j.timeoutMs });
      } catch (e) {
        // Full (the worker checked the shared count, another thread got the last room): served, not counted.
        if (!(e instanceof TooManyListenersError)) throw e;
      }
      if (!session && j.protocol === 'hls') {
        // Not counted: the worker forgets the handle, so the session's next request asks again
        // (and the worker keeps nothing for it).
        this.forgetLater(worker, j.h);
        continue;
      }
      table.set(j.h, { session });
      if (session) {
        const list = this.bySession.get(session);
        if (list) list.push([worker, j.h]);
        else this.bySession.set(session, [[worker, j.h]]);
      }
    }
    for (let i = 0; i < b.seen.length; i++) {
      const s = table.get(b.seen[i]!)?.session;
      if (s) this.registry.seen(s, b.seenAt[i]!);
    }
    for (let i = 0; i < b.leaves.length; i++) {
      const e = table.get(b.leaves[i]!);
      table.delete(b.leaves[i]!);
      if (e?.session) this.registry.leave(e.session);
    }
  }

  /** Worker `worker` stopped or crashed: its progressive sessions leave (HLS ones time out as usual). */
  workerGone(worker: number): void {
    const table = this.workers.get(worker);
    this.workers.delete(worker);
    if (!table) return;
    for (const e of table.values()) if (e.session && e.session.protocol === 'icecast') this.registry.leave(e.session);
  }

  /** Stops listening to the registry. */
  close(): void {
    this.offLeave();
    if (this.forgetSoon) clearImmediate(this.forgetSoon);
    this.forgetSoon = null;
  }

  /** A session left the registry: the workers holding it forget their handles. */
  private left(s: Session): void {
    const list = this.bySession.get(s);
    if (!list) return;
    this.bySession.delete(s);
    for (const [w, h] of list) {
      const table = this.workers.get(w);
      if (table?.get(h)?.session === s) table.delete(h);
      if (s.protocol !== 'hls' || !table) continue;
      this.forgetLater(w, h);
    }
  }

  /** Tells worker `w` to forget handle `h` at the next turn of the event loop (one message per worker). */
  private forgetLater(w: number, h: number): void {
    const hs = this.forgetting.get(w);
    if (hs) hs.push(h);
    else this.forgetting.set(w, [h]);
    if (!this.forgetSoon) {
      this.forgetSoon = setImmediate(() => {
        this.forgetSoon = null;
        const all = this.forgetting;
        this.forgetting = new Map();
        for (const [w, hs] of all) this.forget(w, Int32Array.from(hs));
      });
      this.forgetSoon.unref();
    }
  }
}
