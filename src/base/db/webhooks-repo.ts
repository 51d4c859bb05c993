/**
 * Webhooks (spec "Webhooks", "Events", docs/behaviour.md §6, §9): endpoints, the durable delivery
 * queue and its schedule, the attempt history, and the fan-out of `events` rows into deliveries.
 * Every time is Unix milliseconds from the caller's clock (so the schedule is testable).
 */
import type { Database } from './database.js';
import { paginator, type Page, type PageQuery } from './paginate.js';

export type WebhookStatus = 'active' | 'disabled';
export type DeliveryStatus = 'pending' | 'delivered' | 'undelivered';

export interface WebhookRow {
  id: string;
  account_id: string;
  url: string;
  events: string; // JSON array of event types or ["*"]
  description: string | null;
  status: WebhookStatus;
  secret_enc: Buffer;
  from_event_seq: number;
  created_at: number; // ms
  deleted_at: number | null;
}

export interface DeliveryRow {
  seq: number;
  event_id: string;
  webhook_id: string;
  account_id: string;
  status: DeliveryStatus;
  attempt_count: number;
  next_attempt_at: number | null;
  created_at: number;
}

export interface AttemptRow {
  seq: number;
  delivery_seq: number;
  attempted_at: number;
  finished_at: number;
  response_status: number | null;
  duration_ms: number;
  error: string | null;
  response_body: string | null;
}

/** A due delivery with what an attempt needs: the event row's fields (the body is built from them). */
export interface DueDelivery {
  seq: number;
  webhook_id: string;
  attempt_count: number;
  event_id: string;
  type: string;
  created: number; // Unix seconds
  livemode: number;
  data: string; // JSON
}

/** The outcome of one attempt, as the engine reports it. */
export interface AttemptResult {
  deliverySeq: number;
  attemptedAt: number;
  finishedAt: number;
  /** Wall-clock duration of the attempt (ms), measured independently of the injectable clock. */
  durationMs: number;
  responseStatus: number | null;
  error: string | null;
  responseBody: string | null;
  delivered: boolean;
}

/**
 * Decides the state after a failed attempt: `attemptCount` is the number of attempts of the series
 * including this one, `finishedAt` the end of the failed attempt (ms). Returns the next attempt time,
 * or null when the series is exhausted (→ `undelivered`).
 */
export type RetryPolicy = (attemptCount: number, finishedAt: number) => number | null;

/** Prepared statements over `webhooks`, `webhook_deliveries`, `webhook_attempts`, `webhook_dispatch`. */
export class WebhooksRepo {
  private readonly s;
  private readonly page;
  private readonly dispatchTx;
  private readonly completeTx;

  constructor(readonly db: Database) {
    this.s = {
      insert: db.prepare(`INSERT INTO webhooks (id, account_id, url, events, description, status, secret_enc, from_event_seq, created_at, deleted_at)
        VALUES (@id, @account_id, @url, @events, @description, @status, @secret_enc, @from_event_seq, @created_at, @deleted_at)`),
      byId: db.prepare('SELECT * FROM webhooks WHERE id = ? AND account_id = ? AND deleted_at IS NULL'),
      byIdAny: db.prepare('SELECT * FROM webhooks WHERE id = ?'),
      count: db.prepare('SELECT COUNT(*) FROM webhooks WHERE account_id = ? AND deleted_at IS NULL').pluck(),
      update: db.prepare('UPDATE webhooks SET url = @url, events = @events, description = @description, status = @status WHERE id = @id AND deleted_at IS NULL'),
      setSecret: db.prepare('UPDATE webhooks SET secret_enc = ? WHERE id = ? AND deleted_at IS NULL'),
      softDelete: db.prepare('UPDATE webhooks SET deleted_at = ? WHERE id = ? AND deleted_at IS NULL'),
      abandonPending: db.prepare("UPDATE webhook_deliveries SET status = 'undelivered', next_attempt_at = NULL WHERE webhook_id = ? AND status = 'pending'"),
      maxEventSeq: db.prepare('SELECT COALESCE(MAX(seq), 0) FROM events').pluck(),
      eventSeq: db.prepare('SELECT seq FROM events WHERE id = ?').pluck(),
      cursor: db.prepare('SELECT last_event_seq FROM webhook_dispatch WHERE id = 1').pluck(),
      setCursor: db.prepare('UPDATE webhook_dispatch SET last_event_seq = ? WHERE id = 1'),
      batchEnd: db.prepare('SELECT MAX(seq) FROM (SELECT seq FROM events WHERE seq > ? ORDER BY seq LIMIT ?)').pluck(),
      // Fan-out: every active endpoint of the event's account that existed before the event and
      // subscribes to its type ("*" = all); a webhook.test goes to the endpoint it names only.
      fanOut: db.prepare(`INSERT OR IGNORE INTO webhook_deliveries (event_id, webhook_id, account_id, status, attempt_count, next_attempt_at, created_at)
        SELECT e.id, w.id, e.account_id, 'pending', 0, @now, @now
        FROM events e JOIN webhooks w ON w.account_id = e.account_id
        WHERE e.seq > @from AND e.seq <= @to
          AND w.deleted_at IS NULL AND w.status = 'active' AND w.from_event_seq < e.seq
          AND (CASE WHEN e.type = 'webhook.test' THEN w.id = json_extract(e.data, '$.object.id')
               ELSE EXISTS (SELECT 1 FROM json_each(w.events) j WHERE j.value = '*' OR j.value = e.type) END)
        RETURNING webhook_id`).pluck(),
      insertDelivery: db.prepare(`INSERT OR IGNORE INTO webhook_deliveries (event_id, webhook_id, account_id, status, attempt_count, next_attempt_at, created_at)
        VALUES (?, ?, ?, 'pending', 0, ?, ?)`),
      dueWebhooks: db.prepare(`SELECT DISTINCT d.webhook_id FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id
        WHERE d.status = 'pending' AND d.next_attempt_at <= ? AND w.status = 'active' AND w.deleted_at IS NULL`).pluck(),
      nextDue: db.prepare("SELECT MIN(next_attempt_at) FROM webhook_deliveries WHERE status = 'pending' AND next_attempt_at > ?").pluck(),
      dueFor: db.prepare(`SELECT d.seq, d.webhook_id, d.attempt_count, e.id AS event_id, e.type, e.created, e.livemode, e.data
        FROM webhook_deliveries d JOIN events e ON e.id = d.event_id
        WHERE d.webhook_id = ? AND d.status = 'pending' AND d.next_attempt_at <= ?
        ORDER BY d.next_attempt_at, d.seq LIMIT ?`),
      deliveryBySeq: db.prepare('SELECT status, attempt_count FROM webhook_deliveries WHERE seq = ?'),
      markDelivered: db.prepare("UPDATE webhook_deliveries SET status = 'delivered', attempt_count = attempt_count + 1, next_attempt_at = NULL WHERE seq = ?"),
      markFailed: db.prepare('UPDATE webhook_deliveries SET status = ?, attempt_count = ?, next_attempt_at = ? WHERE seq = ?'),
      insertAttempt: db.prepare(`INSERT INTO webhook_attempts (delivery_seq, attempted_at, finished_at, response_status, duration_ms, error, response_body)
        VALUES (?, ?, ?, ?, ?, ?, ?)`),
      deliveriesOf: db.prepare('SELECT * FROM webhook_deliveries WHERE event_id = ? ORDER BY seq'),
      attemptsOf: db.prepare('SELECT * FROM webhook_attempts WHERE delivery_seq = ? ORDER BY seq'),
      requeue: db.prepare("UPDATE webhook_deliveries SET status = 'pending', attempt_count = 0, next_attempt_at = ? WHERE event_id = ? AND webhook_id = ?"),
      subscribed: db.prepare(`SELECT w.id FROM webhooks w WHERE w.account_id = ? AND w.deleted_at IS NULL AND w.status = 'active'
        AND EXISTS (SELECT 1 FROM json_each(w.events) j WHERE j.value = '*' OR j.value = ?)`).pluck(),
      // Feed-update pings (migration 012): deliveries to internal destinations whose "event" is a feed_pings row.
      insertFeedPing: db.prepare('INSERT INTO feed_pings (id, podcast_id, feed_url, reason, created_at) VALUES (?, ?, ?, ?, ?)'),
      dueFeedPings: db.prepare(`SELECT d.seq, d.webhook_id, d.attempt_count, p.id AS event_id, p.reason AS type, p.created_at / 1000 AS created, 1 AS livemode, p.feed_url AS data
        FROM webhook_deliveries d JOIN feed_pings p ON p.id = d.event_id
        WHERE d.webhook_id = ? AND d.status = 'pending' AND d.next_attempt_at <= ?
        ORDER BY d.next_attempt_at, d.seq LIMIT ?`),
      abandonFeedPings: db.prepare(`UPDATE webhook_deliveries SET status = 'undelivered', next_attempt_at = NULL
        WHERE status = 'pending' AND webhook_id LIKE 'feed:%' AND webhook_id NOT IN (SELECT value FROM json_each(?))`),
    };
    this.page = paginator<WebhookRow>(db, 'webhooks', 'account_id = @accountId AND deleted_at IS NULL AND (@status IS NULL OR status = @status)');
    this.dispatchTx = db.transaction((now: number, batch: number): { events: number; webhookIds: string[] } => {
      const from = this.s.cursor.get() as number;
      const to = this.s.batchEnd.get(from, batch) as number | null;
      if (to === null) return { events: 0, webhookIds: [] };
      const ids = this.s.fanOut.all({ now, from, to }) as string[];
      this.s.setCursor.run(to);
      return { events: to - from, webhookIds: [...new Set(ids)] };
    });
    this.completeTx = db.transaction((results: AttemptResult[], policy: RetryPolicy) => {
      for (const r of results) {
        const d = this.s.deliveryBySeq.get(r.deliverySeq) as { status: DeliveryStatus; attempt_count: number } | undefined;
        if (!d) continue; // gone (never happens: deliveries are not deleted)
        this.s.insertAttempt.run(r.deliverySeq, r.attemptedAt, r.finishedAt, r.responseStatus, Math.max(0, Math.round(r.durationMs)), r.error, r.responseBody);
        if (d.status !== 'pending') continue; // webhook deleted meanwhile: history only
        if (r.delivered) this.s.markDelivered.run(r.deliverySeq);
        else {
          const n = d.attempt_count + 1;
          const next = policy(n, r.finishedAt);
          this.s.markFailed.run(next === null ? 'undelivered' : 'pending', n, next, r.deliverySeq);
        }
      }
    });
  }

  // ── endpoints ──

  insert(row: WebhookRow): void {
    this.s.insert.run(row);
  }
  /** The live (not deleted) webhook `id` of `accountId`, or undefined. */
  get(id: string, accountId: string): WebhookRow | undefined {
    return this.s.byId.get(id, accountId) as WebhookRow | undefined;
  }
  /** The webhook `id` whatever its account or state (the dispatcher), or undefined. */
  getAny(id: string): WebhookRow | undefined {
    return this.s.byIdAny.get(id) as WebhookRow | undefined;
  }
  /** Live webhooks of the account. */
  count(accountId: string): number {
    return this.s.count.get(accountId) as number;
  }
  /** A page of the account's webhooks, newest first. @throws UnknownCursorError */
  list(accountId: string, status: WebhookStatus | undefined, q: PageQuery): Page<WebhookRow> {
    return this.page({ accountId, status: status ?? null }, q);
  }
  /** Writes url, events, description, status. */
  update(row: WebhookRow): void {
    this.s.update.run(row);
  }
  setSecret(id: string, secretEnc: Buffer): void {
    this.s.setSecret.run(secretEnc, id);
  }
  /** Soft-deletes the webhook; its pending deliveries become `undelivered` (no further attempts). */
  softDelete(id: string, now: number): void {
    this.db.transaction(() => {
      this.s.softDelete.run(now, id);
      this.s.abandonPending.run(id);
    })();
  }
  /** The newest events.seq (0 when none): a new webhook receives only events after it. */
  maxEventSeq(): number {
    return this.s.maxEventSeq.get() as number;
  }

  // ── fan-out ──

  /**
   * Turns up to `batch` events after the dispatch cursor into pending deliveries (due `now`) and
   * advances the cursor, in one transaction. Returns how many events were consumed and the
   * webhooks that got deliveries. Idempotent per (event, webhook).
   */
  dispatch(now: number, batch = 500): { events: number; webhookIds: string[] } {
    return this.dispatchTx.immediate(now, batch);
  }
  /** Queues one delivery due `now` (inside the caller's transaction; ignored if it exists). */
  insertDelivery(eventId: string, webhookId: string, accountId: string, now: number): void {
    this.s.insertDelivery.run(eventId, webhookId, accountId, now, now);
  }

  // ── the queue ──

  /** Active webhooks with at least one delivery due at `now`. */
  dueWebhooks(now: number): string[] {
    return this.s.dueWebhooks.all(now) as string[];
  }
  /** The earliest pending `next_attempt_at` after `now`, or null. */
  nextDueAfter(now: number): number | null {
    return (this.s.nextDue.get(now) as number | null) ?? null;
  }
  /** Up to `limit` deliveries of `webhookId` due at `now`, oldest due first. */
  dueFor(webhookId: string, now: number, limit: number): DueDelivery[] {
    return this.s.dueFor.all(webhookId, now, limit) as DueDelivery[];
  }
  /** Records attempts and moves their deliveries (delivered / next time / undelivered) in one transaction. */
  complete(results: AttemptResult[], policy: RetryPolicy): void {
    this.completeTx.immediate(results, policy);
  }

  // ── history ──

  /** The deliveries of an event with their attempts, oldest first. */
  deliveriesOf(eventId: string): Array<DeliveryRow & { attempts: AttemptRow[] }> {
    const rows = this.s.deliveriesOf.all(eventId) as DeliveryRow[];
    return rows.map((d) => ({ ...d, attempts: this.s.attemptsOf.all(d.seq) as AttemptRow[] }));
  }
  /** Active webhooks of the account subscribed to `type` (or "*"). */
  subscribedTo(accountId: string, type: string): string[] {
    return this.s.subscribed.all(accountId, type) as string[];
  }
  /**
   * Queues a new series for (event, webhook), due `now`: an existing delivery is reset to pending
   * with its attempt count at 0 (the history stays), a missing one is created.
   */
  requeue(eventId: string, webhookId: string, accountId: string, now: number): void {
    const changed = this.s.requeue.run(now, eventId, webhookId).changes;
    if (changed === 0) this.s.insertDelivery.run(eventId, webhookId, accountId, now, now);
  }
  // ── feed-update pings (internal destinations of the engine) ──

  /**
   * Records one feed change (`id` = `fpg_…`) and queues a delivery of it, due `now`, to each
   * internal destination in `destinationIds` (inside the caller's transaction).
   */
  insertFeedPing(ping: { id: string; podcastId: string; feedUrl: string; reason: string; accountId: string }, destinationIds: string[], now: number): void {
    this.s.insertFeedPing.run(ping.id, ping.podcastId, ping.feedUrl, ping.reason, now);
    for (const d of destinationIds) this.s.insertDelivery.run(ping.id, d, ping.accountId, now, now);
  }
  /** Up to `limit` feed pings of internal destination `destinationId` due at `now` (`type` = reason, `data` = feed URL). */
  dueFeedPings(destinationId: string, now: number, limit: number): DueDelivery[] {
    return this.s.dueFeedPings.all(destinationId, now, limit) as DueDelivery[];
  }
  /** Pending feed pings of destinations no longer configured (not in `keep`) end `undelivered`; the count. */
  abandonFeedPings(keep: string[]): number {
    return this.s.abandonFeedPings.run(JSON.stringify(keep)).changes;
  }
  /** The events.seq of an event id, or undefined. */
  eventSeq(eventId: string): number | undefined {
    return this.s.eventSeq.get(eventId) as number | undefined;
  }
}
