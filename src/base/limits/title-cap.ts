/**
 * The cap on title changes per stream (docs/listeners.md "Title changes"): at most one change is
 * applied per `minIntervalMs`. The first change of a quiet stream applies at once; changes that
 * arrive sooner wait, each replacing the one waiting before it, and the newest is applied when the
 * interval since the last applied change has passed. So a burst of N changes becomes at most two
 * applied ones (the first and the newest), and what is applied last is always the newest asked.
 * Holds one entry (and one timer) per stream that changed within the last interval.
 */

/** A stream that applied a change within the last interval; its timer fires when the interval has passed. */
interface StreamState<T> {
  /** The newest change waiting for the interval to pass (boxed: a waiting value may itself be null). */
  pending: { value: T } | null;
  timer: NodeJS.Timeout | null;
}

export interface TitleCapOptions<T> {
  /** At most one change per this long per stream (ms); 0 applies every change at once. */
  minIntervalMs: number;
  /** Applies a change now (must not throw; the lifecycle's own path logs and retries its writes). */
  apply: (streamId: string, value: T) => void;
  /** Called when a change was coalesced (another replaced it, or it waits): for the limit counters. */
  onCapped?: (streamId: string) => void;
}

/** Per-stream cap of changes, coalescing into the newest (see the file comment). */
export class TitleCap<T> {
  private readonly streams = new Map<string, StreamState<T>>();

  constructor(private readonly o: TitleCapOptions<T>) {}

  /** A change of `streamId`: applied now when the stream's interval has passed, else kept as the one to apply next. */
  offer(streamId: string, value: T): void {
    if (this.o.minIntervalMs <= 0) return this.o.apply(streamId, value);
    const s = this.streams.get(streamId);
    if (!s) {
      const fresh: StreamState<T> = { pending: null, timer: null };
      this.streams.set(streamId, fresh);
      this.arm(streamId, fresh, this.o.minIntervalMs);
      return this.o.apply(streamId, value);
    }
    s.pending = { value };
    this.o.onCapped?.(streamId);
  }

  /** Changes waiting to be applied (tests, stats). */
  waiting(): number {
    let n = 0;
    for (const s of this.streams.values()) if (s.pending) n++;
    return n;
  }

  /** Drops what waits for `streamId` and its interval: its next change applies at once. */
  forget(streamId: string): void {
    const s = this.streams.get(streamId);
    if (s?.timer) clearTimeout(s.timer);
    this.streams.delete(streamId);
  }

  /** Applies what waits for `streamId` now, whatever the interval, and forgets the stream (it ends: its last title counts). */
  flush(streamId: string): void {
    const s = this.streams.get(streamId);
    if (!s) return;
    if (s.timer) clearTimeout(s.timer);
    this.streams.delete(streamId);
    if (s.pending) this.o.apply(streamId, s.pending.value);
  }

  /** Stops every timer; waiting changes are dropped (server shutdown). */
  close(): void {
    for (const s of this.streams.values()) if (s.timer) clearTimeout(s.timer);
    this.streams.clear();
  }

  /** When the interval has passed: applies the waiting change (and waits another interval), or forgets the stream. */
  private arm(streamId: string, s: StreamState<T>, delayMs: number): void {
    s.timer = setTimeout(() => {
      s.timer = null;
      const p = s.pending;
      if (!p) {
        this.streams.delete(streamId);
        return;
      }
      s.pending = null;
      this.arm(streamId, s, this.o.minIntervalMs);
      this.o.apply(streamId, p.value);
    }, delayMs);
    s.timer.unref();
  }
}
