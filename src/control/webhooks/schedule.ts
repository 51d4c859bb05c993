/**
 * The retry schedule (spec "Retries", docs/behaviour.md §6, §9): a failed delivery is retried after exactly
 * 1 min, 5 min, 30 min, 2 h and 8 h, each wait counted from the end of the failed attempt; when the
 * sixth attempt (the fifth retry) fails, the delivery is `undelivered`.
 */
import type { RetryPolicy } from '../../base/db/webhooks-repo.js';

/** Waits before retry 1…5 (ms). */
export const RETRY_DELAYS_MS: readonly number[] = [60_000, 5 * 60_000, 30 * 60_000, 2 * 3_600_000, 8 * 3_600_000];

/**
 * `attemptCount` attempts (1-based, this one included) have failed, the last ending at `finishedAt`
 * (ms): the time of the next attempt, or null when none is left.
 */
export const retryPolicy: RetryPolicy = (attemptCount, finishedAt) => {
  const wait = RETRY_DELAYS_MS[attemptCount - 1];
  return wait === undefined ? null : finishedAt + wait;
};
