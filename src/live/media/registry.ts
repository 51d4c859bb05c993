/**
 * The stream hubs of the node by stream id (`MediaRegistry`): opening and ending them, the one HLS
 * timeline each stream keeps across its broadcasts and across restarts of the node (docs/streams.md
 * "One timeline", src/live/media/timeline.ts), and the ingest bitrate watch (docs/behaviour.md §2
 * `bitrate_spike`). Where it sits: docs/architecture.md "The two paths".
 */
import { StreamHub } from './hub.js';
import { DRAIN_TIMEOUT_MS } from './ladder.js';
import type { HubEvents, HubOptions, MediaLog, Timeline } from './hub-types.js';
import { StreamTimeline, unreadableMark, type TimelineStore } from './timeline.js';

/** How often the ingest bitrate watch samples each publisher's byte count (ms). */
const BITRATE_SAMPLE_MS = 1000;
/** How long an ended hub is kept aside (ms) — its encoded layers drain meanwhile — before only its timeline is kept. */
const RETIRE_MS = 2 * DRAIN_TIMEOUT_MS;

/**
 * Hubs by stream id, and the one timer of the ingest bitrate watch. A stream's broadcasts share one
 * HLS timeline (docs/streams.md "One timeline"): when a broadcast ends its hub leaves at once (the
 * stream's playlists answer 404 while it is idle), and the next broadcast's hub continues the media
 * sequence and discontinuity sequence where it stopped. The registry keeps, per stream that
 * broadcast since start-up, that position (two numbers) and its layers' reservations; with a
 * `TimelineStore`, a restart of the node continues each stream's timeline above every number the
 * previous run handed out (src/live/media/timeline.ts).
 */
export class MediaRegistry {
  private readonly hubs = new Map<string, StreamHub>();
  /** Hubs of broadcasts that ended in the last RETIRE_MS (their encoded layers may still add a segment). */
  private readonly retired = new Map<string, StreamHub>();
  /** Where each stream's timeline stopped, for streams whose hub retired. */
  private readonly timelines = new Map<string, Timeline>();
  /** Each stream's reservations, from its stored marks (only with a `TimelineStore`). */
  private readonly reserved = new Map<string, StreamTimeline>();
  private bitrateTimer: NodeJS.Timeout | null = null;
  /** Told of every hub opened (`onOpen`). */
  private readonly watchers: Array<(hub: StreamHub) => void> = [];

  /**
   * `now`: the clock of the bitrate watch (ms). `store`: where timeline marks are kept across
   * restarts (absent: each run starts every stream's timeline at 0). `log`: where an unreadable
   * store is reported.
   */
  constructor(
    private readonly now: () => number = Date.now,
    private readonly store?: TimelineStore,
    private readonly log?: MediaLog,
  ) {}

  get(streamId: string): StreamHub | undefined {
    return this.hubs.get(streamId);
  }

  /** The hubs open now, by stream id (read at scrape time: docs/metrics.md). */
  current(): ReadonlyMap<string, StreamHub> {
    return this.hubs;
  }

  /**
   * Calls `fn` with every hub opened from now on, right after it is created (the readers that
   * follow a hub's layers — the HTTP threads' mirror, the native parts store — watch each one).
   */
  onOpen(fn: (hub: StreamHub) => void): void {
    this.watchers.push(fn);
  }

  /** The stream's hub, created on first use (an ended one is replaced), continuing the stream's timeline. */
  open(streamId: string, opts: HubOptions, events?: HubEvents): StreamHub {
    let hub = this.hubs.get(streamId);
    if (!hub || hub.ended) {
      const timeline = this.reservations(streamId);
      const continues = this.timelineOf(streamId, hub) ?? timeline?.restart;
      hub = new StreamHub(streamId, { ...opts, ...(continues ? { continues } : {}), ...(timeline ? { timeline } : {}) }, events);
      this.hubs.set(streamId, hub);
      this.watchBitrates();
      for (const fn of this.watchers) fn(hub);
    } else this.watchBitrates();
    return hub;
  }

  /**
   * Ends the stream's hub (its broadcast ended): layers end (progressive listeners are let go) and
   * the hub leaves at once — the stream's playlists answer 404 until its next broadcast, which
   * continues the timeline.
   */
  end(streamId: string): void {
    const hub = this.hubs.get(streamId);
    if (!hub) return;
    hub.end();
    this.hubs.delete(streamId);
    this.retired.set(streamId, hub);
    setTimeout(() => {
      if (this.retired.get(streamId) !== hub) return;
      this.retired.delete(streamId);
      this.timelines.set(streamId, hub.timeline());
    }, RETIRE_MS).unref();
  }

  /** Where the stream's timeline continues from (an ended hub still listed, a retired one, or one kept), or undefined for a new one. */
  private timelineOf(streamId: string, ended: StreamHub | undefined): Timeline | undefined {
    const old = ended ?? this.retired.get(streamId);
    this.retired.delete(streamId);
    const t = old?.timeline() ?? this.timelines.get(streamId);
    this.timelines.delete(streamId);
    return t;
  }

  /**
   * The stream's reservations (read from the store on the stream's first hub of the run); undefined
   * without a store. Marks that cannot be read are taken as `unreadableMark` (logged): above any
   * number an earlier run can have handed out.
   */
  private reservations(streamId: string): StreamTimeline | undefined {
    if (!this.store) return undefined;
    let t = this.reserved.get(streamId);
    if (t) return t;
    let stored: Map<string, Timeline>;
    try {
      stored = this.store.load(streamId);
    } catch (e) {
      this.log?.error('HLS timeline marks unreadable: the timeline continues from the clock', { streamId, err: (e as Error).message });
      stored = new Map([['', unreadableMark(Date.now())]]);
    }
    this.reserved.set(streamId, (t = new StreamTimeline(streamId, stored, this.store)));
    return t;
  }

  /** Forgets a hub at once (a publish that never went live); the stream's timeline position stays. */
  delete(streamId: string): void {
    const hub = this.hubs.get(streamId);
    this.hubs.delete(streamId);
    if (hub && !this.retired.has(streamId)) this.timelines.set(streamId, hub.timeline());
  }

  /** Server shutdown: every hub stops without ending (recordings kept for the next run). */
  async close(): Promise<void> {
    if (this.bitrateTimer) clearInterval(this.bitrateTimer);
    this.bitrateTimer = null;
    await Promise.all([...this.hubs.values()].map((h) => h.close()));
  }

  /** Once a second while anyone publishes; stops when nobody does. */
  private watchBitrates(): void {
    if (this.bitrateTimer) return;
    this.bitrateTimer = setInterval(() => {
      const now = this.now();
      let publishing = 0;
      for (const hub of this.hubs.values()) {
        if (!hub.publishing) continue;
        publishing++;
        try {
          hub.sampleBitrate(now);
        } catch {
          // A failing report (database) must not stop the watch of the other streams.
        }
      }
      if (publishing === 0 && this.bitrateTimer) {
        clearInterval(this.bitrateTimer);
        this.bitrateTimer = null;
      }
    }, BITRATE_SAMPLE_MS);
    this.bitrateTimer.unref();
  }
}
