/**
 * Held blocking requests of one layer (LL-HLS blocking playlist reloads and preload-hint part
 * waits, draft-pantos-hls-rfc8216bis §6.2.5.2, §6.2.6): the one list both the main thread's
 * `Layer` (src/live/media/layer.ts) and a worker thread's mirror of a layer
 * (src/delivery/hls/mirror.ts) keep. They all wait the same time, so their deadlines come in list
 * order: one timer per layer, armed for the oldest; cancelling only marks a waiter and the list
 * sheds marked ones as it is walked (no timer and no allocation beyond the waiter itself per held
 * request, no O(n) cancel).
 */

interface Waiter {
  msn: number;
  part: number | undefined;
  /** A blocking playlist reload (a part index past its segment's last rolls over to the next segment). */
  reload: boolean;
  done: () => void;
  /** When it is answered anyway (ms, `Date.now()` clock). */
  deadline: number;
  /** Answered or cancelled: skipped when met in the list. */
  gone: boolean;
}

/**
 * Waiters of one layer; `has(msn, part, reload)` says whether what a waiter waits for exists now
 * (`reload`: as a blocking playlist reload reads it, rfc8216bis §6.2.5.2).
 */
export class Waiters {
  private list: Waiter[] = [];
  private timer: NodeJS.Timeout | null = null;

  /** @param has whether segment `msn` (part `part`) exists now (rfc8216bis §6.2.5.2). */
  constructor(private readonly has: (msn: number, part: number | undefined, reload: boolean) => boolean) {}

  /**
   * Calls `done` once `has(msn, part)` holds at a `wake`, at `wakeAll`, or after `maxWaitMs`
   * (ms) — whichever comes first. `reload`: a blocking playlist reload. Returns the cancel
   * function (for an aborted request).
   */
  add(msn: number, part: number | undefined, maxWaitMs: number, done: () => void, reload = false): () => void {
    const w: Waiter = { msn, part, reload, done, deadline: Date.now() + maxWaitMs, gone: false };
    this.list.push(w);
    if (!this.timer) this.arm();
    return () => {
      w.gone = true;
    };
  }

  /** Held now (for diagnostics and tests). */
  get size(): number {
    let n = 0;
    for (const w of this.list) if (!w.gone) n++;
    return n;
  }

  /** Answers every waiter whose object now exists (`all`: every waiter, e.g. the layer ended). */
  wake(all = false): void {
    if (this.list.length === 0) return;
    const due: Waiter[] = [];
    const keep: Waiter[] = [];
    for (const w of this.list) {
      if (w.gone) continue;
      if (all || this.has(w.msn, w.part, w.reload)) {
        w.gone = true;
        due.push(w);
      } else keep.push(w);
    }
    this.list = keep;
    if (keep.length === 0 && this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    for (const w of due) call(w);
  }

  /** Arms the one timer for the oldest live waiter's deadline (none when nobody waits). */
  private arm(): void {
    let i = 0;
    while (i < this.list.length && this.list[i]!.gone) i++;
    if (i > 0) this.list = this.list.slice(i);
    const first = this.list[0];
    if (!first) return;
    this.timer = setTimeout(() => this.expire(), Math.max(0, first.deadline - Date.now()));
    this.timer.unref();
  }

  /** Answers every waiter whose deadline passed, then re-arms. */
  private expire(): void {
    this.timer = null;
    const now = Date.now();
    let i = 0;
    const due: Waiter[] = [];
    for (; i < this.list.length; i++) {
      const w = this.list[i]!;
      if (w.gone) continue;
      if (w.deadline > now) break;
      w.gone = true;
      due.push(w);
    }
    this.list = this.list.slice(i);
    this.arm();
    for (const w of due) call(w);
  }
}

/** Runs a waiter's callback; its fault stays its own (this runs from a timer or a message). */
function call(w: Waiter): void {
  try {
    w.done();
  } catch {
    // The callback answers one request (its own errors are answered there); nothing to do here.
  }
}
