/**
 * The webhook dispatcher (docs/behaviour.md §6): sends each webhook delivery to its endpoint.
 * Everything it knows is in SQLite: `events` rows are fanned out into `webhook_deliveries` through a cursor (so events of any
 * feature, written in that feature's transaction by the Outbox, flow here without it knowing), and
 * each delivery carries its schedule (`next_attempt_at`). The dispatcher only keeps what is in flight.
 *
 * - Lanes: one per endpoint, each with its own keep-alive agent and at most `perEndpoint` attempts
 *   in flight, filled from that endpoint's own due rows. A slow or dead endpoint fills its lane and
 *   nothing else: other endpoints' rows are never behind it in a shared queue.
 * - Bounded: at most `maxInFlight` attempts overall.
 * - Signing: `Signer` (Piscina workers in the server).
 * - Results are written in batches (one transaction per turn of the event loop); a row stays
 *   "in flight" in memory until its result is committed, so it is never picked twice.
 * - Crash: an attempt whose result was not committed is still `pending` and due, so it is made
 *   again after restart (at least once; same body, same `Idempotency-Key`). Committed schedule
 *   times are absolute, so a restart neither resets nor advances them.
 * - Wake-ups, not polling: new events are announced (`notify`, from the Outbox), deliveries queued
 *   by a service name their lane (`wake`), commits of other connections (another process) are
 *   reported by `commits`, and the one timer is armed only while a delivery waits for a retry, for
 *   its due time. With nothing pending the engine arms no timer and runs no query.
 * - Clock: `now` (ms) stamps attempts and decides what is due. With the real clock (`Date.now`)
 *   the timer sleeps until the next due time, at most MAX_SLEEP_MS at a time (a stepped wall clock
 *   delays a retry by no more than that; an early wake-up costs a comparison, no query). With an
 *   injected clock it re-checks every `pollMs` while a retry waits, so a test clock that jumps is
 *   noticed within `pollMs`.
 */
import type http from 'node:http';
import type { AttemptResult, DueDelivery, WebhookRow, WebhooksRepo } from '../../base/db/webhooks-repo.js';
import type { Logger } from '../../base/logger.js';
import type { Signer } from './signer.js';
import { endpointAgent, postOnce, type PostOptions, type PostResult } from './post.js';
import { retryPolicy } from './schedule.js';
import { signatureHeader } from './signature.js';

/** Longest sleep (ms) of the retry timer on the real clock (see the module comment). */
const MAX_SLEEP_MS = 60_000;

/** Engine settings; times in ms. */
export interface EngineOptions {
  repo: WebhooksRepo;
  signer: Signer;
  /** The plaintext `whsec_…` secret of a webhook row. */
  secretOf: (row: WebhookRow) => string;
  log: Logger;
  now?: () => number;
  allowPrivate: boolean;
  /** Attempts in flight per endpoint (default 16). */
  perEndpoint?: number;
  /** Attempts in flight overall (default 1024). */
  maxInFlight?: number;
  /** Time allowed for a response (default 10 000: spec "delivered = 2xx within 10 s"). */
  timeoutMs?: number;
  /**
   * While a delivery waits for a retry on an injected `now`: the longest sleep between checks of
   * the clock (default 500). Also the wait before retrying after a failed queue read.
   */
  pollMs?: number;
  /**
   * Subscribes to commits of other database connections (another process writing events or
   * deliveries); returns the unsubscribe function. Each report runs `pump()`. Without it, such rows
   * wait for the next announcement, wake-up, due retry or start.
   */
  commits?: (onCommit: () => void) => () => void;
  /** Events fanned out per transaction (default 500). */
  dispatchBatch?: number;
  /** The HTTP attempt (tests may replace it). */
  post?: (o: PostOptions) => Promise<PostResult>;
  /**
   * Internal destinations: lanes that are not `webhooks` rows (feed-update notifications, ./feed-notify.ts).
   * Their deliveries are `webhook_deliveries` rows like any other (same schedule, attempts and
   * durability); the destination reads its due rows and builds each request (no signature).
   */
  internal?: InternalDestination[];
}

/** A lane of deliveries that is not a webhook endpoint (see `EngineOptions.internal`). */
export interface InternalDestination {
  /** The lane id, the deliveries' `webhook_id` (never a `wh_…` id). */
  id: string;
  /** Up to `limit` deliveries of this lane due at `now`, oldest due first. */
  due(now: number, limit: number): DueDelivery[];
  /** The request of one attempt of `row` (the same on every attempt). */
  request(row: DueDelivery): { method: 'GET' | 'POST'; url: string; headers: Record<string, string>; body: string };
}

interface Lane {
  id: string;
  inflight: Set<number>;
  agent: http.Agent | null;
  agentUrl: string;
  secret: { enc: Buffer; plain: string } | null;
  refillQueued: boolean;
}

/** The JSON body of an event (spec "Event"), built from its stored row; the same bytes on every attempt. */
export function eventBody(row: Pick<DueDelivery, 'event_id' | 'type' | 'created' | 'livemode' | 'data'>): string {
  return `{"id":${JSON.stringify(row.event_id)},"object":"event","type":${JSON.stringify(row.type)},"created":${row.created},"livemode":${row.livemode ? 'true' : 'false'},"data":${row.data}}`;
}

/** Delivers pending webhook deliveries; see the module comment. */
export class Dispatcher {
  private readonly lanes = new Map<string, Lane>();
  private readonly starved = new Set<string>();
  private readonly now: () => number;
  private readonly perEndpoint: number;
  private readonly maxInFlight: number;
  private readonly timeoutMs: number;
  private readonly pollMs: number;
  private readonly post: (o: PostOptions) => Promise<PostResult>;
  private inFlight = 0;
  private results: Array<AttemptResult & { webhookId: string }> = [];
  private flushQueued = false;
  private dispatchQueued = false;
  private timer: NodeJS.Timeout | null = null;
  /** The earliest `next_attempt_at` (ms) after the last pump, lowered by failed attempts since; null = none. */
  private nextDue: number | null = null;
  private readonly realClock: boolean;
  /** A queue read or fan-out failed (SQLite busy beyond busy_timeout, …): pump again after `pollMs`. */
  private failed = false;
  private unwatch: (() => void) | null = null;
  private closed = false;
  private started = false;
  private idleWaiters: Array<() => void> = [];
  private readonly internal: Map<string, InternalDestination>;
  /** Attempts committed, by outcome (docs/metrics.md `skylark_webhook_deliveries_total`): delivered, to be retried, given up. */
  readonly outcomes = { delivered: 0, retrying: 0, undelivered: 0 };

  constructor(private readonly o: EngineOptions) {
    this.internal = new Map((o.internal ?? []).map((d) => [d.id, d]));
    this.now = o.now ?? Date.now;
    this.realClock = this.now === Date.now;
    this.perEndpoint = o.perEndpoint ?? 16;
    this.maxInFlight = o.maxInFlight ?? 1024;
    this.timeoutMs = o.timeoutMs ?? 10_000;
    this.pollMs = o.pollMs ?? 500;
    this.post = o.post ?? postOnce;
  }

  /** Starts: fans out what the cursor has not seen, then delivers whatever is due; listens for other connections' commits. */
  start(): void {
    if (this.started || this.closed) return;
    this.started = true;
    this.unwatch = this.o.commits?.(() => this.pump()) ?? null;
    this.notify();
    this.pump();
  }

  /** New events were committed (Outbox announcement): fan them out soon. */
  notify(): void {
    if (this.closed || !this.started || this.dispatchQueued) return;
    this.dispatchQueued = true;
    setImmediate(() => {
      this.dispatchQueued = false;
      this.dispatch();
    });
  }

  /** A delivery was (re)queued for `webhookId` (test, redeliver): try its lane now. */
  wake(webhookId: string): void {
    if (this.closed || !this.started) return;
    this.queueRefill(this.lane(webhookId));
  }

  /**
   * Fans out events after the cursor (one batch per turn, so a backlog never blocks the loop) and
   * fills the lanes that got deliveries. Returns the number of events consumed by this batch.
   */
  dispatch(): number {
    if (this.closed) return 0;
    let r: { events: number; webhookIds: string[] };
    try {
      r = this.o.repo.dispatch(this.now(), this.o.dispatchBatch ?? 500);
    } catch (e) {
      this.o.log.error('webhook fan-out failed', { err: String(e) });
      this.failed = true;
      this.arm();
      return 0;
    }
    for (const id of r.webhookIds) this.fill(this.lane(id));
    if (r.events > 0) this.notify(); // maybe more
    return r.events;
  }

  /**
   * Fans out new events, starts every attempt that is due now and has room (all endpoints), then
   * arms the timer for the next due time, if any (see the module comment). Returns the number of
   * attempts started.
   */
  pump(): number {
    if (this.closed) return 0;
    let started = 0;
    this.failed = false;
    try {
      this.dispatch();
      const now = this.now();
      for (const id of this.o.repo.dueWebhooks(now)) started += this.fill(this.lane(id));
      for (const id of this.internal.keys()) started += this.fill(this.lane(id));
      this.nextDue = this.o.repo.nextDueAfter(now);
      this.arm();
    } catch (e) {
      this.o.log.error('webhook pump failed', { err: String(e) });
      this.failed = true;
      this.arm();
    }
    return started;
  }

  /** Resolves when nothing is in flight and every result is committed (tests, bench). */
  idle(): Promise<void> {
    if (this.inFlight === 0 && this.results.length === 0) return Promise.resolve();
    return new Promise((r) => this.idleWaiters.push(r));
  }

  /** Attempts in flight now. */
  get inFlightCount(): number {
    return this.inFlight;
  }

  /**
   * Stops: no new attempts; results already in are committed; attempts still running are abandoned
   * (their deliveries stay pending and due, and are made again after restart).
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.flushResults();
    this.closed = true;
    this.unwatch?.();
    this.unwatch = null;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    for (const lane of this.lanes.values()) lane.agent?.destroy();
    this.lanes.clear();
    for (const w of this.idleWaiters.splice(0)) w();
  }

  /**
   * Arms the timer for `nextDue` (see the module comment), or `pollMs` away after a failure; none
   * when nothing waits.
   */
  private arm(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.closed || (this.nextDue === null && !this.failed)) return;
    let wait = this.failed ? this.pollMs : Infinity;
    if (this.nextDue !== null) wait = Math.min(wait, this.realClock ? MAX_SLEEP_MS : this.pollMs, Math.max(0, this.nextDue - this.now()));
    this.timer = setTimeout(() => {
      this.timer = null;
      if (!this.failed && this.nextDue !== null && this.now() < this.nextDue) this.arm(); // early: no query
      else this.pump();
    }, wait);
    this.timer.unref();
  }

  private lane(id: string): Lane {
    let lane = this.lanes.get(id);
    if (!lane) this.lanes.set(id, (lane = { id, inflight: new Set(), agent: null, agentUrl: '', secret: null, refillQueued: false }));
    return lane;
  }

  private queueRefill(lane: Lane): void {
    if (lane.refillQueued) return;
    lane.refillQueued = true;
    setImmediate(() => {
      lane.refillQueued = false;
      this.fill(lane);
    });
  }

  /** Starts due attempts of one endpoint up to its free room. Returns how many started. */
  private fill(lane: Lane): number {
    if (this.closed) return 0;
    const dest = this.internal.get(lane.id);
    if (dest) return this.fillInternal(lane, dest);
    const wh = this.o.repo.getAny(lane.id);
    if (!wh || wh.deleted_at !== null || wh.status !== 'active') {
      if (lane.inflight.size === 0) {
        lane.agent?.destroy();
        this.lanes.delete(lane.id);
      }
      return 0;
    }
    const room = Math.min(this.perEndpoint - lane.inflight.size, this.maxInFlight - this.inFlight);
    if (room <= 0) {
      if (lane.inflight.size < this.perEndpoint) this.starved.add(lane.id);
      return 0;
    }
    const rows = this.o.repo.dueFor(lane.id, this.now(), room + lane.inflight.size);
    let started = 0;
    for (const row of rows) {
      if (started >= room) break;
      if (lane.inflight.has(row.seq)) continue;
      lane.inflight.add(row.seq);
      this.inFlight++;
      started++;
      void this.attempt(lane, wh, row);
    }
    return started;
  }

  /** `fill` for an internal destination's lane. */
  private fillInternal(lane: Lane, dest: InternalDestination): number {
    const room = Math.min(this.perEndpoint - lane.inflight.size, this.maxInFlight - this.inFlight);
    if (room <= 0) {
      if (lane.inflight.size < this.perEndpoint) this.starved.add(lane.id);
      return 0;
    }
    let started = 0;
    for (const row of dest.due(this.now(), room + lane.inflight.size)) {
      if (started >= room) break;
      if (lane.inflight.has(row.seq)) continue;
      lane.inflight.add(row.seq);
      this.inFlight++;
      started++;
      const r = dest.request(row);
      void this.send(lane, row, r.url, async () => ({ ...r, headers: { 'User-Agent': 'Skylark-Feeds/1.0', ...r.headers } }));
    }
    return started;
  }

  private secret(lane: Lane, wh: WebhookRow): string {
    if (!lane.secret || !lane.secret.enc.equals(wh.secret_enc)) lane.secret = { enc: wh.secret_enc, plain: this.o.secretOf(wh) };
    return lane.secret.plain;
  }

  private agent(lane: Lane, url: string): http.Agent {
    const origin = new URL(url).origin;
    if (!lane.agent || lane.agentUrl !== origin) {
      // A changed URL: the old agent is left to its in-flight requests; its idle sockets time out.
      lane.agent = endpointAgent(url, this.perEndpoint);
      lane.agentUrl = origin;
    }
    return lane.agent;
  }

  private attempt(lane: Lane, wh: WebhookRow, row: DueDelivery): Promise<void> {
    return this.send(lane, row, wh.url, async (attemptedAt) => {
      const body = eventBody(row);
      const t = Math.floor(attemptedAt / 1000);
      const v1 = await this.o.signer.sign(this.secret(lane, wh), t, body);
      return {
        method: 'POST',
        url: wh.url,
        body,
        headers: {
          'Content-Type': 'application/json',
          'User-Agent': 'Skylark-Webhooks/1.0',
          'Service-Signature': signatureHeader(t, v1),
          'Service-Event': row.type,
          'Idempotency-Key': row.event_id,
        },
      };
    });
  }

  /** Makes one attempt of `row` with the request `build` gives (at the attempt's time) and queues its result. */
  private async send(
    lane: Lane,
    row: DueDelivery,
    url: string,
    build: (attemptedAt: number) => Promise<{ method: 'GET' | 'POST'; url: string; headers: Record<string, string>; body: string }>,
  ): Promise<void> {
    const attemptedAt = this.now();
    const t0 = performance.now();
    let res: PostResult;
    try {
      const r = await build(attemptedAt);
      if (this.closed) return this.abandon();
      res = await this.post({ ...r, agent: this.agent(lane, url), timeoutMs: this.timeoutMs, allowPrivate: this.o.allowPrivate });
    } catch (e) {
      if (this.closed) return this.abandon();
      this.o.log.error('webhook attempt failed before sending', { webhookId: lane.id, eventId: row.event_id, err: String(e) });
      res = { status: null, error: 'internal_error', body: null };
    }
    if (this.closed) return this.abandon();
    const delivered = res.status !== null && res.status >= 200 && res.status < 300 && res.error === null;
    this.results.push({
      webhookId: lane.id,
      deliverySeq: row.seq,
      attemptedAt,
      finishedAt: this.now(),
      durationMs: performance.now() - t0,
      responseStatus: res.status,
      error: res.error,
      responseBody: res.body,
      delivered,
    });
    if (!this.flushQueued) {
      this.flushQueued = true;
      setImmediate(() => this.flushResults());
    }
  }

  /** An attempt cut short by close(): nothing is recorded (the delivery stays due). */
  private abandon(): void {
    this.inFlight--;
  }

  private flushResults(): void {
    this.flushQueued = false;
    if (this.closed || this.results.length === 0) return;
    const batch = this.results;
    this.results = [];
    const retry = { at: Infinity }; // the earliest retry this batch schedules
    let retrying = 0;
    let undelivered = 0;
    try {
      this.o.repo.complete(batch, (n, finishedAt) => {
        const at = retryPolicy(n, finishedAt);
        if (at !== null) retry.at = Math.min(retry.at, at);
        if (at !== null) retrying++;
        else undelivered++;
        return at;
      });
    } catch (e) {
      // SQLite busy beyond busy_timeout or similar: keep the results and try again shortly.
      this.o.log.error('webhook results not saved; retrying', { err: String(e), n: batch.length });
      this.results.unshift(...batch);
      setTimeout(() => this.flushResults(), 200).unref();
      return;
    }
    this.outcomes.retrying += retrying;
    this.outcomes.undelivered += undelivered;
    for (const r of batch) if (r.delivered) this.outcomes.delivered++;
    if (retry.at !== Infinity && (this.nextDue === null || retry.at < this.nextDue)) {
      this.nextDue = retry.at;
      this.arm();
    }
    const touched = new Set<Lane>();
    for (const r of batch) {
      const lane = this.lanes.get(r.webhookId);
      this.inFlight--;
      if (lane) {
        lane.inflight.delete(r.deliverySeq);
        touched.add(lane);
      }
    }
    for (const lane of touched) this.fill(lane);
    if (this.starved.size && this.inFlight < this.maxInFlight) {
      const ids = [...this.starved];
      this.starved.clear();
      for (const id of ids) this.fill(this.lane(id));
    }
    if (this.inFlight === 0 && this.results.length === 0) for (const w of this.idleWaiters.splice(0)) w();
  }
}
