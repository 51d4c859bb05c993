/**
 * Background work the composition root (src/main.ts, src/app/) starts and stops (the listeners
 * room, the publication scheduler, webhook delivery, …): `start` runs after listening (URLs
 * known), in order; `close` at shutdown, in reverse order.
 */
export interface Feature {
  start?(): void | Promise<void>;
  close?(): void | Promise<void>;
}
