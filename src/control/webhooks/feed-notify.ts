/**
 * Feed-update notifications (docs/podcasts.md "Feed-update notifications"): a WebSub hub
 * (`SKYLARK_WEBSUB_HUB`; W3C WebSub, the publisher's `hub.mode=publish` ping) told of every change
 * of a served feed, and podping-style notifiers (`SKYLARK_FEED_NOTIFY_URLS`) called with
 * `GET <url>?url=<feed>&reason=update|live|liveEnd` when an episode is published and when a
 * broadcast recorded into the podcast goes live or ends.
 *
 * Each change is a `feed_pings` row and one `webhook_deliveries` row per destination, written in
 * the transaction of the change; the webhook dispatcher (./engine.ts) delivers them as
 * internal destinations, with the webhooks' retry schedule and durability (a restart resumes
 * them). Delivered = any 2xx, like webhooks.
 */
import { createHash } from 'node:crypto';
import { newId } from '../../base/ids.js';
import type { DueDelivery, WebhooksRepo } from '../../base/db/webhooks-repo.js';
import type { Outbox } from '../../base/outbox.js';
import type { InternalDestination } from './dispatch.js';

/** A notifier of `SKYLARK_FEED_NOTIFY_URLS`: its URL and the bearer token it is called with, if any. */
export interface FeedNotifyTarget {
  url: string;
  token?: string | undefined;
}

/** What changed a feed: an episode published, another change of the feed, a recorded broadcast going live or ending. */
export type FeedChange = 'published' | 'changed' | 'live' | 'liveEnd';

/** The `reason` a notifier is told, by change. */
const REASON: Record<FeedChange, 'update' | 'live' | 'liveEnd'> = { published: 'update', changed: 'update', live: 'live', liveEnd: 'liveEnd' };

export interface FeedNotificationsOptions {
  repo: WebhooksRepo;
  /** The WebSub hub's URL, or undefined for none. */
  hubUrl?: string | undefined;
  /** The notifiers. */
  notify: FeedNotifyTarget[];
  now: () => number;
  /** Asks the dispatcher to try a destination's lane (after the change's transaction committed). */
  wake: (destinationId: string) => void;
}

const idOf = (kind: string, key: string) => `feed:${kind}:${createHash('sha1').update(key).digest('hex').slice(0, 12)}`;

/** Queues feed pings and describes their destinations to the dispatcher. */
export class FeedNotifications {
  /** The engine's internal destinations (hub first, then the notifiers); empty when none is configured. */
  readonly destinations: InternalDestination[] = [];
  private readonly hubId: string | null;
  private readonly notifyIds: string[] = [];

  constructor(private readonly o: FeedNotificationsOptions) {
    const due = (id: string) => (now: number, limit: number) => o.repo.dueFeedPings(id, now, limit);
    this.hubId = null;
    if (o.hubUrl) {
      const hub = o.hubUrl;
      const id = (this.hubId = idOf('hub', hub));
      this.destinations.push({
        id,
        due: due(id),
        // WebSub publishers' ping (PubSubHubbub 0.4 §7, what hubs such as pubsubhubbub.appspot.com take).
        request: (row: DueDelivery) => ({
          method: 'POST',
          url: hub,
          headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
          body: `hub.mode=publish&hub.url=${encodeURIComponent(row.data)}`,
        }),
      });
    }
    for (const t of o.notify) {
      const id = idOf('notify', `${t.url}|${t.token ?? ''}`);
      if (this.notifyIds.includes(id)) continue;
      this.notifyIds.push(id);
      this.destinations.push({
        id,
        due: due(id),
        request: (row: DueDelivery) => ({
          method: 'GET',
          url: `${t.url}${t.url.includes('?') ? '&' : '?'}url=${encodeURIComponent(row.data)}&reason=${encodeURIComponent(row.type)}`,
          headers: (t.token ? { Authorization: `Bearer ${t.token}` } : {}) as Record<string, string>,
          body: '',
        }),
      });
    }
  }

  /**
   * Records that the feed of `podcastId` (at `feedUrl`) changed: the hub is pinged on every change,
   * the notifiers on `published`, `live` and `liveEnd`. Call inside the transaction of the change;
   * the engine is woken after the current turn (when the transaction has committed).
   */
  changed(accountId: string, podcastId: string, feedUrl: string, change: FeedChange): void {
    const ids = [...(this.hubId ? [this.hubId] : []), ...(change === 'changed' ? [] : this.notifyIds)];
    if (ids.length === 0) return;
    this.o.repo.insertFeedPing({ id: newId('fpg'), podcastId, feedUrl, reason: REASON[change], accountId }, ids, this.o.now());
    setImmediate(() => {
      for (const id of ids) this.o.wake(id);
    });
  }

  /** At start: pending pings of destinations no longer configured end `undelivered`. Returns how many. */
  forgetOthers(): number {
    return this.o.repo.abandonFeedPings(this.destinations.map((d) => d.id));
  }
}

/**
 * Turns the broadcasts of streams recorded into a podcast into `live` / `liveEnd` feed changes:
 * every committed `stream.started` / `stream.ended` of a `public` stream whose `recording.podcastId`
 * names a podcast whose feed is served (`served(podcastId)`) calls `changed` (in a transaction of
 * its own: `tx`). Returns the unsubscribe function.
 */
export function watchBroadcasts(
  outbox: Pick<Outbox, 'subscribe'>,
  served: (podcastId: string) => boolean,
  tx: (fn: () => void) => void,
  changed: (accountId: string, podcastId: string, change: 'live' | 'liveEnd') => void,
): () => void {
  return outbox.subscribe((e, accountId) => {
    if (e.type !== 'stream.started' && e.type !== 'stream.ended') return;
    const stream = e.data.object as { recording?: { podcastId?: string } | null; playback?: string };
    const podcastId = stream.recording?.podcastId;
    if (!podcastId || stream.playback !== 'public' || !served(podcastId)) return;
    tx(() => changed(accountId, podcastId, e.type === 'stream.started' ? 'live' : 'liveEnd'));
  });
}
