/**
 * Giving freed C heap memory back to the kernel (docs/decisions.md "Giving freed memory back").
 *
 * glibc's allocator returns memory to the kernel only from the top of a heap; pages freed inside
 * it (a burst of connections' transient buffers between the long-lived ones, external strings and
 * buffers a V8 collection just let go) stay resident until `malloc_trim`. After each major V8
 * collection (`perf_hooks` "gc" entries of kind major), at most once per `minIntervalMs`, this
 * calls `malloc_trim(0)` (native/binding/memory.cc), which hands every whole free page of every
 * arena back. Process-wide: one per process, on the main thread. `limitMallocArenas` caps how many
 * arenas glibc makes, so that V8's helper threads share one instead of each keeping a heap.
 */
import { constants, PerformanceObserver, type PerformanceEntry } from 'node:perf_hooks';
import { loadedAddon } from './addon.js';

interface MemoryAddon {
  trimMalloc(): boolean;
  limitMallocArenas(n: number): boolean;
}
const addon = loadedAddon as MemoryAddon;

/** `malloc_trim(0)` now: true when the allocator gave pages back (always false off glibc). */
export function trimMalloc(): boolean {
  return addon.trimMalloc();
}

/** Why `limitMallocArenas` left glibc's arena count alone, or '' when it set it. */
export type ArenaLimitOutcome = '' | 'operator' | 'unsupported';

/**
 * Caps glibc's malloc arenas at `n` (1–64) for the threads that have not allocated yet
 * (`mallopt(M_ARENA_MAX, n)`, docs/decisions.md "Giving freed memory back"): threads that start
 * allocating once `n` arenas exist share them instead of each getting a heap of its own, whose
 * freed pieces stay resident. Left alone when the operator set glibc's own setting
 * (`MALLOC_ARENA_MAX`, or `glibc.malloc.arena_max` in `GLIBC_TUNABLES`) in `env`.
 * @returns '' when set, 'operator' when the environment sets it, 'unsupported' off glibc
 * @throws RangeError when `n` is not an integer in 1–64
 */
export function limitMallocArenas(n: number, env: NodeJS.ProcessEnv = process.env): ArenaLimitOutcome {
  if (!Number.isInteger(n) || n < 1 || n > 64) throw new RangeError(`malloc arenas must be an integer in 1–64 (got ${n})`);
  if (env.MALLOC_ARENA_MAX !== undefined || (env.GLIBC_TUNABLES ?? '').includes('glibc.malloc.arena_max')) return 'operator';
  return addon.limitMallocArenas(n) ? '' : 'unsupported';
}

/** What the trimming after major collections did so far. */
export interface TrimStats {
  /** Major collections seen. */
  majorGcs: number;
  /** `malloc_trim` calls made. */
  trims: number;
  /** Time spent in them (ms). */
  trimMs: number;
}

/** A running trim-after-GC observer. */
export interface GcTrimmer {
  readonly stats: TrimStats;
  /** Stops observing. */
  stop(): void;
}

/** At most one trim per this long (ms) by default: major collections come seconds apart at most under load. */
export const TRIM_MIN_INTERVAL_MS = 1000;

/**
 * Trims the C heap after every major V8 collection, at most once per `minIntervalMs` (≥ 0).
 * @throws RangeError for a negative or non-finite interval
 */
export function trimAfterMajorGc(minIntervalMs: number = TRIM_MIN_INTERVAL_MS): GcTrimmer {
  if (!(minIntervalMs >= 0 && Number.isFinite(minIntervalMs))) throw new RangeError(`minIntervalMs must be ≥ 0 (got ${minIntervalMs})`);
  const stats: TrimStats = { majorGcs: 0, trims: 0, trimMs: 0 };
  let last = -Infinity;
  const obs = new PerformanceObserver((list) => {
    let major = false;
    for (const e of list.getEntries() as Array<PerformanceEntry & { detail?: { kind?: number } }>) {
      if (e.detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR) {
        major = true;
        stats.majorGcs++;
      }
    }
    const now = performance.now();
    if (!major || now - last < minIntervalMs) return;
    last = now;
    trimMalloc();
    stats.trims++;
    stats.trimMs += performance.now() - now;
  });
  obs.observe({ entryTypes: ['gc'] });
  return { stats, stop: () => obs.disconnect() };
}
