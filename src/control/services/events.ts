/**
 * The Events resource (spec "Events", docs/behaviour.md §6, §9): list an account's events (newest first,
 * optionally of one `type`), get one with its deliveries and every attempt, and redeliver. Knows no
 * HTTP and no SQL text.
 */
import { notFound, paramInvalid } from '../../base/errors/errors.js';
import { UnknownCursorError, type PageQuery } from '../../base/db/paginate.js';
import type { EventRow, EventsQuery } from '../../base/db/events-repo.js';
import type { DeliveryStatus, WebhooksRepo } from '../../base/db/webhooks-repo.js';
import type { Database } from '../../base/db/database.js';
import type { ApiEvent, EventType } from '../../base/outbox.js';

/** One attempt as GET /events/{id} shows it (docs/behaviour.md §9). */
export interface AttemptObject {
  attemptedAt: string;
  responseStatus: number | null;
  durationMs: number;
  error: string | null;
  /** The first bytes of the receiver's answer (at most 1 KiB). */
  responseBody: string | null;
}

/** One endpoint's delivery of an event (docs/behaviour.md §9). `nextAttemptAt` is null unless pending. */
export interface DeliveryObject {
  webhookId: string;
  status: DeliveryStatus;
  nextAttemptAt: string | null;
  attempts: AttemptObject[];
}

export type EventWithDeliveries = ApiEvent & { deliveries: DeliveryObject[] };

export interface EventsDeps {
  db: Database;
  events: EventsQuery;
  webhooks: WebhooksRepo;
  /** Tells the dispatcher that `webhookId` has a new due delivery. */
  wake: (webhookId: string) => void;
  now?: () => number;
}

const iso = (ms: number) => new Date(ms).toISOString();

/** The event object of a stored row (spec "Event"). */
export function toApiEvent(row: EventRow): ApiEvent {
  return {
    id: row.id,
    object: 'event',
    type: row.type as EventType,
    created: row.created,
    livemode: row.livemode === 1,
    data: JSON.parse(row.data) as ApiEvent['data'],
  };
}

export class EventsService {
  private readonly now: () => number;
  constructor(private readonly d: EventsDeps) {
    this.now = d.now ?? Date.now;
  }

  /** A page of the account's events, newest first. @throws ApiError 400 for an unknown cursor */
  list(accountId: string, type: EventType | undefined, q: PageQuery): { data: ApiEvent[]; hasMore: boolean } {
    try {
      const page = this.d.events.list(accountId, type, q);
      return { data: page.rows.map(toApiEvent), hasMore: page.hasMore };
    } catch (e) {
      if (e instanceof UnknownCursorError) throw paramInvalid(e.param, e.message);
      throw e;
    }
  }

  /** The event with `deliveries` (one per endpoint, attempts oldest first). @throws ApiError 404 */
  get(accountId: string, id: string): EventWithDeliveries {
    const row = this.d.events.get(id, accountId);
    if (!row) throw notFound('event', id);
    return this.withDeliveries(row);
  }

  /**
   * Queues a new delivery series, due now, of the event to `webhookId`, or (without it) to every
   * endpoint that already has a delivery of it and every active endpoint subscribed to its type now
   * (for `webhook.test`: the endpoint it was sent to). Finished deliveries become pending again with
   * a fresh schedule; the attempt history stays. @throws ApiError 404 (event, webhook)
   */
  redeliver(accountId: string, id: string, webhookId?: string): EventWithDeliveries {
    const row = this.d.events.get(id, accountId);
    if (!row) throw notFound('event', id);
    let targets: string[];
    if (webhookId !== undefined) {
      const wh = this.d.webhooks.get(webhookId, accountId);
      if (!wh) throw notFound('webhook', webhookId, 'webhookId');
      targets = [webhookId];
    } else {
      const existing = this.d.webhooks.deliveriesOf(id).map((d) => d.webhook_id);
      const subscribed =
        row.type === 'webhook.test'
          ? [((JSON.parse(row.data) as { object?: { id?: string } }).object?.id ?? '')]
          : this.d.webhooks.subscribedTo(accountId, row.type);
      targets = [...new Set([...existing, ...subscribed])].filter((w) => this.d.webhooks.get(w, accountId) !== undefined);
    }
    const now = this.now();
    this.d.db.transaction(() => {
      for (const w of targets) this.d.webhooks.requeue(id, w, accountId, now);
    }).immediate();
    for (const w of targets) this.d.wake(w);
    return this.withDeliveries(row);
  }

  private withDeliveries(row: EventRow): EventWithDeliveries {
    const deliveries = this.d.webhooks.deliveriesOf(row.id).map(
      (d): DeliveryObject => ({
        webhookId: d.webhook_id,
        status: d.status,
        nextAttemptAt: d.status === 'pending' && d.next_attempt_at !== null ? iso(d.next_attempt_at) : null,
        attempts: d.attempts.map((a) => ({
          attemptedAt: iso(a.attempted_at),
          responseStatus: a.response_status,
          durationMs: a.duration_ms,
          error: a.error,
          responseBody: a.response_body,
        })),
      }),
    );
    return { ...toApiEvent(row), deliveries };
  }
}
