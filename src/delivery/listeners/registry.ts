/**
 * Who listens (docs/behaviour.md §4, §10): one entry per HLS session (a server-minted `sid`, or a listener
 * token's subject), WebRTC peer or progressive (Icecast-style) connection. `listener.joined` on the
 * first media request (HLS) or on connect, `listener.left` after 3 target durations without a
 * request (HLS) or when the peer or connection closes (WebRTC, Icecast). Events are
 * durable (outbox) and the sessions persist in SQLite (stats survive restarts).
 *
 * The hot path (a segment GET of a known session) is `touch`: two map lookups and a number store.
 * No SQLite and no timer per listener: expiry runs on a timer wheel (500 ms slots) that looks at a
 * listener only when its deadline slot comes up, and re-files it if it was seen since. Joins and
 * leaves are written in batches (one transaction per ~50 ms), last-seen times every 15 s.
 *
 * Idle costs nothing: the wheel's timer runs only while a session is filed on it, the last-seen
 * timer only while the node tracks a session (or a peak not yet written), the batch timer only while
 * a batch waits. With no listener the registry arms no timer at all.
 *
 * Memory per listener: the Session object, its two map entries (one for a session keyed by its
 * listener id) and one wheel-slot reference;
 * measured ≈ 0.7 KB with a ~105-character user agent (docs/listeners.md).
 */
import { newId } from '../../base/ids.js';
import type { Outbox } from '../../base/outbox.js';
import { UnitOfWork } from '../../base/db/unit-of-work.js';
import type { ListenersRepo } from '../../base/db/listeners-repo.js';
import type { Database } from '../../base/db/database.js';
import type { Logger } from '../../base/logger.js';
import type { Limits } from '../../base/limits/limits.js';
import { PerAddressRate } from '../../base/limits/address-key.js';
import type { ListenerObject, ListenerProtocol, StreamStats } from '../../base/listeners.js';
import { KeyedSession, markCatchUp, MAX_LISTENERS, modeOf, ownString as own, rowObject, Session, sessionObject, TooManyListenersError, USER_AGENT_MAX, type JoinInfo, type SessionStream } from './session.js';
export type { ListenerObject, ListenerProtocol, StreamStats } from '../../base/listeners.js';

interface StreamListeners {
  /** The stream's id (an own copy, shared by its sessions). */
  id: string;
  /** The stream and its account as its sessions keep them (one object for all of them). */
  who: SessionStream;
  sessions: Map<string, Session>; // by key (sid / token subject / peer id); insertion = join order
  /** Sessions whose key is not their id, by id (a session keyed by its id is found in `sessions`). */
  byId: Map<string, Session>;
  peak: number;
  peakPersisted: number;
}

type Op = { t: 'join'; s: Session; concurrent: number } | { t: 'leave'; s: Session; at: number };

const SLOT_MS = 500;
const BATCH_MS = 50;
const SEEN_FLUSH_MS = 15_000;

/** Distinct strings the registry shares between sessions (countries, user agents, account ids) before it starts over. */
const SHARED_MAX = 4096;

export interface RegistryDeps {
  db: Database;
  repo: ListenersRepo;
  outbox: Outbox;
  log: Logger;
  now?: () => number;
  /**
   * New HLS sessions one client address (IPv6: its /64) may start per minute
   * (`SKYLARK_HLS_SESSIONS_PER_IP_PER_MINUTE`, see `admitHls`); unlimited when absent.
   */
  hlsSessionsPerIpPerMinute?: number;
  /** Where a refusal of `admitHls` is counted (`hls_sessions_per_ip`). */
  limits?: Pick<Limits, 'hit'>;
}

export class ListenerRegistry {
  private readonly streams = new Map<string, StreamListeners>();
  private readonly wheel = new Map<number, Session[]>();
  private lastSlot: number;
  private count = 0;
  private orderSeq = 0;
  private readonly ops: Op[] = [];
  private batchTimer: NodeJS.Timeout | null = null;
  /** The wheel's timer: runs while the wheel holds a session (see `file`, `tick`). */
  private tickTimer: NodeJS.Timeout | null = null;
  /** The last-seen flush: runs while `streams` holds an entry (see `join`, `flushSeen`). */
  private seenTimer: NodeJS.Timeout | null = null;
  private readonly leaveHooks = new Set<(s: Session) => void>();
  private readonly now: () => number;
  /** After close(): no more SQLite work (keep-alive requests may still arrive while shutting down). */
  private closed = false;
  /**
   * The node's listener count, shared with the worker threads (they refuse new sessions at
   * MAX_LISTENERS without asking): cell 0, stored on every join and leave.
   */
  readonly countCell = new Int32Array(new SharedArrayBuffer(4));
  /** New HLS sessions per client address per minute (null: unlimited). */
  private readonly hlsRate: PerAddressRate | null;

  /** Strings that repeat across sessions, one copy each (see `shared`). */
  private readonly strings = new Map<string, string>();

  /** The joins and leaves as units of work: one transaction, events after the commit (src/base/db/unit-of-work.ts). */
  private readonly uow: UnitOfWork;

  constructor(private readonly d: RegistryDeps) {
    this.uow = new UnitOfWork(d.db, d.outbox);
    this.now = d.now ?? Date.now;
    this.lastSlot = Math.floor(this.now() / SLOT_MS);
    this.hlsRate = d.hlsSessionsPerIpPerMinute === undefined ? null : new PerAddressRate(d.hlsSessionsPerIpPerMinute, 60_000, this.now);
  }

  /**
   * Until when (epoch ms) an address `admitHls` just refused stays refused: the end of the
   * session rate's current minute (0 without a rate).
   */
  hlsRateRefusedUntil(): number {
    return this.hlsRate ? this.hlsRate.windowEndsAt() : 0;
  }

  /**
   * Whether a new HLS session of the client at `address` may join now: at most
   * `hlsSessionsPerIpPerMinute` per address group (IPv4, or an IPv6 /64) within any minute, counted
   * node-wide here (every thread's joins reach this registry). True counts one; false counts a hit
   * of `hls_sessions_per_ip` and nothing else — the caller serves the request without counting
   * the session (its later requests ask again, and join once the address is under its rate).
   * Call it only for a session the registry does not know yet, right before `join`.
   */
  admitHls(address: string): boolean {
    if (!this.hlsRate || this.hlsRate.take(address)) return true;
    this.d.limits?.hit('hls_sessions_per_ip', address, { setting: 'SKYLARK_HLS_SESSIONS_PER_IP_PER_MINUTE' });
    return false;
  }

  /**
   * Closes sessions a previous run left open (crash, kill): each leaves at its last persisted
   * request, with its `listener.left` event.
   */
  recover(): void {
    const open = this.d.repo.open();
    if (open.length === 0) return;
    const at = this.now();
    this.uow.run(() => {
      for (const r of open) {
        this.d.repo.leave(r.id, r.stream_id, r.connected_at, r.last_seen_at, at);
        this.d.outbox.record(r.account_id, 'listener.left', { object: rowObject(r, r.last_seen_at) });
      }
    });
    this.d.log.info('closed listener sessions left open by the previous run', { count: open.length });
  }

  /**
   * The hot path: marks the session `key` of `streamId` as seen now. False when it is unknown
   * (the caller then joins it).
   */
  touch(streamId: string, key: string): boolean {
    const s = this.streams.get(streamId)?.sessions.get(key);
    if (!s) return false;
    s.lastSeenAt = this.now();
    return true;
  }

  /**
   * A live session was seen at `at` (ms; a worker thread's report, which may come a moment
   * after the request it stands for): its last-seen time moves forward, never back.
   */
  seen(s: Session, at: number): void {
    if (!s.left && at > s.lastSeenAt) s.lastSeenAt = at;
  }

  /**
   * A new listener. `listener.joined` is recorded (batched) with the listener object.
   * @throws TooManyListenersError when the node tracks MAX_LISTENERS already
   */
  join(info: JoinInfo): Session {
    let st = this.streams.get(info.streamId);
    const existing = info.key === '' ? undefined : st?.sessions.get(info.key);
    if (existing) {
      existing.lastSeenAt = this.now();
      return existing;
    }
    if (this.closed) throw new TooManyListenersError('this node is shutting down');
    if (this.count >= MAX_LISTENERS) throw new TooManyListenersError(`this node tracks ${MAX_LISTENERS} listeners already`);
    if (!st) {
      const peak = this.d.repo.totals(info.streamId).peak;
      const id = own(info.streamId);
      st = { id, who: { id, accountId: this.shared(info.accountId) }, sessions: new Map(), byId: new Map(), peak, peakPersisted: peak };
      this.streams.set(info.streamId, st);
      if (!this.seenTimer) {
        this.seenTimer = setInterval(() => this.flushSeen(), SEEN_FLUSH_MS);
        this.seenTimer.unref();
      }
    }
    const now = this.now();
    const id = own(newId('lst'));
    // A stream's sessions share its record; one joined with another account (none expected) keeps its own.
    const who = st.who.accountId === info.accountId ? st.who : { id: st.id, accountId: this.shared(info.accountId) };
    const args = [
      id,
      who,
      info.protocol,
      this.shared(info.country),
      info.userAgent ? this.shared(info.userAgent.slice(0, USER_AGENT_MAX)) : null,
      now,
      info.timeoutMs,
      ++this.orderSeq,
    ] as const;
    const s = info.key === '' ? new Session(...args) : new KeyedSession(own(info.key), ...args);
    if (info.mode === 'catch_up') markCatchUp(s);
    st.sessions.set(s.key, s);
    if (s.key !== s.id) st.byId.set(s.id, s);
    this.count++;
    Atomics.store(this.countCell, 0, this.count);
    if (st.sessions.size > st.peak) st.peak = st.sessions.size;
    if (s.timeoutMs > 0) this.file(s, now + s.timeoutMs);
    this.enqueue({ t: 'join', s, concurrent: st.sessions.size });
    return s;
  }

  /** Ends a session now (WebRTC close/DELETE); no-op when it already left. */
  leave(s: Session): void {
    if (s.left) return;
    s.left = true;
    const st = this.streams.get(s.streamId);
    if (st) {
      st.sessions.delete(s.key);
      if (s.key !== s.id) st.byId.delete(s.id);
      if (st.sessions.size === 0 && st.peak === st.peakPersisted) this.streams.delete(s.streamId);
      if (this.streams.size === 0) this.stopSeen();
    }
    this.count--;
    Atomics.store(this.countCell, 0, this.count);
    this.enqueue({ t: 'leave', s, at: this.now() });
    for (const h of this.leaveHooks) h(s);
  }

  /** Called after any session leaves (timeouts included). Returns the unsubscribe function. */
  onLeave(fn: (s: Session) => void): () => void {
    this.leaveHooks.add(fn);
    return () => this.leaveHooks.delete(fn);
  }

  /** Live listeners of a stream. */
  listenerCount(streamId: string): number {
    return this.streams.get(streamId)?.sessions.size ?? 0;
  }

  /**
   * Live listeners of every stream by protocol (`GET /metrics`, docs/metrics.md): read at scrape
   * time, one pass over the sessions (nothing is counted per request).
   */
  *byProtocol(): IterableIterator<{ streamId: string; protocol: ListenerProtocol; count: number }> {
    for (const st of this.streams.values()) {
      let hls = 0;
      let webrtc = 0;
      let icecast = 0;
      for (const s of st.sessions.values()) {
        if (s.protocol === 'hls') hls++;
        else if (s.protocol === 'webrtc') webrtc++;
        else icecast++;
      }
      if (hls) yield { streamId: st.id, protocol: 'hls', count: hls };
      if (webrtc) yield { streamId: st.id, protocol: 'webrtc', count: webrtc };
      if (icecast) yield { streamId: st.id, protocol: 'icecast', count: icecast };
    }
  }

  /** Live listeners of the whole node. */
  total(): number {
    return this.count;
  }

  /** A live session of `streamId` by listener id. */
  get(streamId: string, id: string): Session | undefined {
    const st = this.streams.get(streamId);
    if (!st) return undefined;
    const s = st.byId.get(id) ?? st.sessions.get(id);
    return s?.id === id ? s : undefined;
  }

  /** The live sessions of a stream, oldest first. */
  active(streamId: string): Session[] {
    const st = this.streams.get(streamId);
    return st ? [...st.sessions.values()] : [];
  }

  /** The API's listener object of a session. */
  object(s: Session): ListenerObject {
    return sessionObject(s, this.now());
  }

  /** `/stats` of a stream: live count and countries from memory, totals from SQLite. @throws Error after close() */
  stats(streamId: string): StreamStats {
    this.flush(); // totals include every join/leave so far
    const totals = this.d.repo.totals(streamId);
    const live = this.active(streamId);
    const byCountry = new Map<string | null, number>();
    let liveMs = 0;
    for (const s of live) {
      byCountry.set(s.country, (byCountry.get(s.country) ?? 0) + 1);
      liveMs += Math.max(0, s.lastSeenAt - s.connectedAt);
    }
    const countries = [...byCountry].map(([country, listeners]) => ({ country, listeners }));
    countries.sort((a, b) => b.listeners - a.listeners || (a.country ?? '~').localeCompare(b.country ?? '~'));
    const sessions = totals.leftSessions + live.length;
    return {
      object: 'stream_stats',
      streamId,
      listenerCount: live.length,
      peakListenerCount: Math.max(totals.peak, this.streams.get(streamId)?.peak ?? 0),
      countries,
      averageListenDurationSeconds: sessions === 0 ? 0 : Math.round((totals.leftDurationMs + liveMs) / sessions / 100) / 10,
      totalListeners: totals.total,
    };
  }

  /** Writes pending joins/leaves now (one transaction) and announces their events. */
  flush(): void {
    if (this.batchTimer) {
      clearTimeout(this.batchTimer);
      this.batchTimer = null;
    }
    if (this.ops.length === 0 || this.closed) return;
    const ops = this.ops.splice(0);
    try {
      this.uow.run(() => {
        for (const op of ops) {
          if (op.t === 'join') {
            const s = op.s;
            this.d.repo.join(
              { id: s.id, account_id: s.accountId, stream_id: s.streamId, protocol: s.protocol, country: s.country, user_agent: s.userAgent, connected_at: s.connectedAt, last_seen_at: s.connectedAt, mode: modeOf(s) },
              op.concurrent,
            );
            this.d.outbox.record(s.accountId, 'listener.joined', { object: sessionObject(s, s.connectedAt) });
          } else if (op.t === 'leave') {
            const s = op.s;
            this.d.repo.leave(s.id, s.streamId, s.connectedAt, s.lastSeenAt, op.at);
            this.d.outbox.record(s.accountId, 'listener.left', { object: sessionObject(s, s.lastSeenAt) });
          }
        }
      });
    } catch (e) {
      this.d.log.error('listener batch not written', { err: e instanceof Error ? e.message : String(e), ops: ops.length });
    }
  }

  /** Stops the timers and writes what is pending; live sessions stay open in SQLite (recovered at next start). */
  close(): void {
    this.stopTick();
    this.flush();
    this.flushSeen();
    this.stopSeen();
    this.closed = true;
  }

  private enqueue(op: Op): void {
    if (this.closed) return;
    this.ops.push(op);
    if (!this.batchTimer) {
      this.batchTimer = setTimeout(() => {
        this.batchTimer = null;
        this.flush();
      }, BATCH_MS);
      this.batchTimer.unref();
    }
  }

  /** One copy of a string that repeats across sessions (a country, a user agent, an account id). */
  private shared<T extends string | null>(v: T): T {
    if (v === null) return v;
    let c = this.strings.get(v);
    if (c === undefined) {
      if (this.strings.size >= SHARED_MAX) this.strings.clear();
      c = own(v);
      this.strings.set(c, c);
    }
    return c as T;
  }

  /** Files `s` at the slot after `deadline`; starts the wheel's timer if it was stopped. */
  private file(s: Session, deadline: number): void {
    if (!this.tickTimer && !this.closed) {
      // The wheel was empty: nothing is due in the slots skipped while stopped.
      this.lastSlot = Math.max(this.lastSlot, Math.floor(this.now() / SLOT_MS));
      this.tickTimer = setInterval(() => this.tick(), SLOT_MS);
      this.tickTimer.unref();
    }
    const slot = Math.max(Math.floor(deadline / SLOT_MS) + 1, this.lastSlot + 1);
    let list = this.wheel.get(slot);
    if (!list) this.wheel.set(slot, (list = []));
    list.push(s);
  }

  /** Expires every slot up to now: sessions seen since they were filed are filed again. Stops the timer once the wheel is empty. */
  private tick(): void {
    const now = this.now();
    const slot = Math.floor(now / SLOT_MS);
    for (let i = this.lastSlot + 1; i <= slot; i++) {
      const list = this.wheel.get(i);
      if (!list) continue;
      this.wheel.delete(i);
      this.lastSlot = i; // re-filing goes to a later slot
      for (const s of list) {
        if (s.left) continue;
        const deadline = s.lastSeenAt + s.timeoutMs;
        if (deadline <= now) this.leave(s);
        else this.file(s, deadline);
      }
    }
    this.lastSlot = slot;
    if (this.wheel.size === 0) this.stopTick();
  }

  private stopTick(): void {
    if (this.tickTimer) clearInterval(this.tickTimer);
    this.tickTimer = null;
  }

  private stopSeen(): void {
    if (this.seenTimer) clearInterval(this.seenTimer);
    this.seenTimer = null;
  }

  /**
   * Persists last-seen times that moved, and peaks, in one transaction. Streams left without
   * sessions are dropped once their peak is written; with none left, the timer stops.
   */
  private flushSeen(): void {
    if (this.closed) return;
    const moved: Session[] = [];
    const peaks: Array<[string, StreamListeners]> = [];
    for (const [id, st] of this.streams) {
      for (const s of st.sessions.values()) if (s.lastSeenAt !== s.persistedSeenAt) moved.push(s);
      if (st.peak > st.peakPersisted) peaks.push([id, st]);
    }
    if (moved.length > 0 || peaks.length > 0) {
      try {
        this.d.db.transaction(() => {
          for (const s of moved) this.d.repo.seen(s.id, s.lastSeenAt);
          for (const [id, st] of peaks) this.d.repo.raisePeak(id, st.peak);
        })();
        for (const s of moved) s.persistedSeenAt = s.lastSeenAt;
        for (const [, st] of peaks) st.peakPersisted = st.peak;
      } catch (e) {
        this.d.log.error('listener last-seen flush failed', { err: e instanceof Error ? e.message : String(e) });
      }
    }
    for (const [id, st] of this.streams) if (st.sessions.size === 0 && st.peak === st.peakPersisted) this.streams.delete(id);
    if (this.streams.size === 0) this.stopSeen();
  }
}
