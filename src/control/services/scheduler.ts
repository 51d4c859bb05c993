/**
 * The durable publication scheduler (docs/behaviour.md §5): the schedule is the episode row itself
 * (`status = 'scheduled'`, `publish_at`), so it survives restarts; this class only keeps one timer
 * armed for the earliest due time. On each tick it publishes whatever is due *by the database's
 * view at that moment* (`publish_at <= now`), so a timer that fires early publishes nothing and
 * re-arms, and a row is published once even if two ticks race. After a restart, `start()`
 * publishes anything that fell due while the server was down, at once. With nothing scheduled no
 * timer is armed (an idle server is not woken): every change of a schedule pokes.
 *
 * A Feature of the composition root (src/main.ts): started after listening, closed at shutdown.
 * Pokes before `start` are ignored: the start publishes what is due and arms for the rest.
 */
import type { Feature } from '../../base/background.js';
import type { Logger } from '../../base/logger.js';

/** Longest single wait (ms) while something is scheduled: the timer re-checks at least this often (clock changes). */
const MAX_WAIT_MS = 60_000;

export interface SchedulerDeps {
  /** The earliest `publish_at` (ms) of any scheduled episode, or null. */
  nextDueAt: () => number | null;
  /** Publishes everything due now; returns how many. */
  publishDue: () => number;
  now: () => number;
  log: Logger;
}

export class PublishScheduler implements Feature {
  private timer: NodeJS.Timeout | null = null;
  private armedFor: number | null = null;
  private started = false;
  private closed = false;

  constructor(private readonly d: SchedulerDeps) {}

  /** Publishes what is already due and arms the timer. */
  start(): void {
    this.started = true;
    this.tick();
  }

  /** Re-arms after a schedule was added, moved or removed. */
  poke(): void {
    if (this.closed || !this.started) return;
    const next = this.d.nextDueAt();
    if (next !== null && this.armedFor !== null && next >= this.armedFor && this.timer) return; // already armed early enough
    this.arm(next);
  }

  /** Stops the timer (shutdown). Scheduled rows stay; the next start picks them up. */
  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  private tick(): void {
    if (this.closed) return;
    this.timer = null;
    this.armedFor = null;
    try {
      const n = this.d.publishDue();
      if (n > 0) this.d.log.info('scheduled episodes published', { count: n });
    } catch (e) {
      this.d.log.error('scheduled publication failed; retrying', { err: e instanceof Error ? e.message : String(e) });
      this.arm(this.d.now() + 5000);
      return;
    }
    this.arm(this.d.nextDueAt());
  }

  /** Arms the timer for `at` (ms; at most MAX_WAIT_MS away); null (nothing scheduled) disarms it. */
  private arm(at: number | null): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.armedFor = null;
    if (this.closed || at === null) return;
    const wait = Math.min(MAX_WAIT_MS, Math.max(0, at - this.d.now()));
    this.armedFor = Math.min(at, this.d.now() + MAX_WAIT_MS);
    this.timer = setTimeout(() => this.tick(), wait);
    this.timer.unref();
  }
}
