/**
 * Waiting on a condition instead of sleeping (no imports of the planes: pure unit tests use it too).
 * test/helpers/server.ts re-exports `waitFor`.
 */

/** Polls `fn` every `everyMs` until it returns a truthy value or `timeoutMs` passes. @throws Error on timeout */
export async function waitFor<T>(fn: () => Promise<T> | T, timeoutMs = 20_000, everyMs = 100, what = 'condition'): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/**
 * Waits until `read()` gives the same value `everyMs` apart (a count that has stopped moving: fds
 * being closed, files being written) and returns it. @throws Error after `timeoutMs`
 */
export async function waitSteady<T>(read: () => T, timeoutMs = 10_000, everyMs = 50, what = 'a steady value'): Promise<T> {
  let last = read();
  return (await waitFor(
    () => {
      const now = read();
      const steady = now === last;
      last = now;
      return steady ? { value: now } : null;
    },
    timeoutMs,
    everyMs,
    what,
  )).value;
}
