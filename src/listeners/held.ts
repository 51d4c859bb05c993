/**
 * Requests the HTTP server holds open — LL-HLS blocking playlist reloads and part waits
 * (rfc8216bis §6.2.5.2, §6.2.6) — capped per client address and in total (PRODUCT.md §13:
 * `httpMaxHeldPerIp`, `httpMaxHeld`). Implements `HoldGate` for src/hls/routes.ts. The client
 * address is the socket peer, or the `X-Forwarded-For` client when the peer is a trusted proxy
 * (src/listeners/geo.ts); it is kept in memory only while the request is held.
 */
import type { BlockList } from 'node:net';
import type { HoldGate } from '../hls/routes.js';
import type { RawRequestInfo } from '../http/server.js';
import { PerAddressCounter, type Limits } from '../limits/limits.js';
import { clientAddress } from './geo.js';

export interface HeldRequestsDeps {
  /** Requests held at once, in total. */
  maxTotal: number;
  /** Requests held at once per client address. */
  maxPerAddress: number;
  trusted: BlockList;
  limits: Limits;
}

export class HeldRequests implements HoldGate {
  private readonly counter: PerAddressCounter;

  constructor(private readonly d: HeldRequestsDeps) {
    this.counter = new PerAddressCounter(d.maxTotal, d.maxPerAddress);
  }

  /**
   * Admits one more held request of the client of `info`: its release function (the first call
   * gives the slot back, later calls do nothing), or null over a cap — then the hit is counted as
   * `http_held` (total) or `http_held_per_ip` on the node's Limits.
   */
  acquire(info: RawRequestInfo): (() => void) | null {
    const ip = clientAddress(info.remoteAddress(), info.header('x-forwarded-for'), this.d.trusted);
    const r = this.counter.tryAcquire(ip);
    if (r !== 'ok') {
      this.d.limits.hit(r === 'total' ? 'http_held' : 'http_held_per_ip', ip);
      return null;
    }
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      this.counter.release(ip);
    };
  }

  /** Requests held now, in total or for one client address. */
  held(address?: string): number {
    return this.counter.held(address);
  }
}
