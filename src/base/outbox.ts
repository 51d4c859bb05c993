/**
 * Domain events (spec "Events"): written to the `events` table in the same transaction as the
 * change that causes them (the outbox), then announced in-process to subscribers (webhook delivery
 * reads the table, so a crash between commit and announcement loses nothing).
 */
import { newId } from './ids.js';
import type { EventsRepo } from './db/events-repo.js';

/** The event types: the spec's, `stream.now_playing` (docs/behaviour.md §11) and `stream.source_changed` (docs/streams.md "Fallback"). */
export type EventType =
  | 'stream.started'
  | 'stream.ended'
  | 'stream.error'
  | 'stream.now_playing'
  | 'stream.source_changed'
  | 'listener.joined'
  | 'listener.left'
  | 'podcast.published'
  | 'podcast.deleted'
  | 'webhook.test';

/** Every event type (spec "Event types", in its order, then `stream.now_playing` of docs/behaviour.md §11 and `stream.source_changed` of docs/streams.md "Fallback"). */
export const EVENT_TYPES: readonly EventType[] = [
  'stream.started',
  'stream.ended',
  'stream.error',
  'stream.now_playing',
  'stream.source_changed',
  'listener.joined',
  'listener.left',
  'podcast.published',
  'podcast.deleted',
  'webhook.test',
];

/** An event object as the API shows it. `created` is Unix seconds. */
export interface ApiEvent {
  id: string;
  object: 'event';
  type: EventType;
  created: number;
  livemode: boolean;
  data: { object: unknown; [extra: string]: unknown };
}

/** Records events; call `record` inside the transaction of the state change. */
export class Outbox {
  private readonly listeners = new Set<(e: ApiEvent, accountId: string) => void>();
  private readonly pending: Array<[ApiEvent, string]> = [];

  constructor(private readonly repo: EventsRepo, private readonly now: () => number = Date.now) {}

  /** Writes one event row; subscribers hear of it after `flush()` (call it after the commit). */
  record(accountId: string, type: EventType, data: ApiEvent['data'], livemode = true): ApiEvent {
    const event: ApiEvent = { id: newId('evt'), object: 'event', type, created: Math.floor(this.now() / 1000), livemode, data };
    this.repo.insert({ id: event.id, account_id: accountId, type, created: event.created, livemode: livemode ? 1 : 0, data: JSON.stringify(data) });
    this.pending.push([event, accountId]);
    return event;
  }

  /** Announces recorded events to subscribers (after the transaction committed). */
  flush(): void {
    const batch = this.pending.splice(0);
    for (const [e, a] of batch) for (const l of this.listeners) l(e, a);
  }

  /**
   * Drops announcements of a rolled-back transaction: all of them, or those recorded since
   * `mark()` returned `from` (a rolled-back savepoint inside a transaction that goes on).
   */
  discard(from = 0): void {
    this.pending.length = Math.min(from, this.pending.length);
  }

  /** How many announcements wait for the commit: the `from` of a later `discard`. */
  mark(): number {
    return this.pending.length;
  }

  /** Subscribes to committed events; returns the unsubscribe function. */
  subscribe(fn: (e: ApiEvent, accountId: string) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }
}
