/**
 * Requests the HTTP server holds open — LL-HLS blocking playlist reloads and part waits
 * (rfc8216bis §6.2.5.2, §6.2.6) — capped per client address and in total (docs/behaviour.md §13:
 * `httpMaxHeldPerIp`, `httpMaxHeld`). Implements `HoldGate` for src/delivery/hls/routes.ts. The client
 * address is the socket peer, or the `X-Forwarded-For` client when the peer is a trusted proxy
 * (src/base/http/client-address.ts); it is kept in memory only while the request is held. The counts are
 * node-wide: every HTTP thread counts into the same shared memory (src/delivery/listeners/shared-counter.ts).
 */
import type { BlockList } from 'node:net';
import type { HoldGate } from '../hls/routes.js';
import type { RawRequestInfo } from '../../base/http/server.js';
import type { Limits } from '../../base/limits/limits.js';
import { clientAddress } from '../../base/http/client-address.js';
import { SharedAddressCounter, type SharedCounterMemory } from './shared-counter.js';

export interface HeldRequestsDeps {
  /** Requests held at once, in total. */
  maxTotal: number;
  /** Requests held at once per client address. */
  maxPerAddress: number;
  trusted: BlockList;
  limits: Pick<Limits, 'hit'>;
  /** The counts of another thread's `HeldRequests` (`memory`), to count into the same cells; new ones when absent. */
  memory?: SharedCounterMemory | undefined;
}

export class HeldRequests implements HoldGate {
  private readonly counter: SharedAddressCounter;

  constructor(private readonly d: HeldRequestsDeps) {
    this.counter = new SharedAddressCounter(d.maxTotal, d.maxPerAddress, d.memory);
  }

  /** The shared counts (hand them to the other threads' `HeldRequests`). */
  get memory(): SharedCounterMemory {
    return this.counter.memory;
  }

  /**
   * Admits one more held request of the client of `info`: the client's address, to hand back to
   * `release` once (when the request is answered, aborted or timed out), or null over a cap — then
   * the hit is counted as `http_held` (total) or `http_held_per_ip` on the node's Limits.
   */
  acquire(info: RawRequestInfo): string | null {
    const ip = clientAddress(info.remoteAddress(), info.header('x-forwarded-for'), this.d.trusted);
    const r = this.counter.tryAcquire(ip);
    if (r !== 'ok') {
      this.d.limits.hit(r === 'total' ? 'http_held' : 'http_held_per_ip', ip);
      return null;
    }
    return ip;
  }

  /** Gives back the slot `acquire` gave for `address`. */
  release(address: string): void {
    this.counter.release(address);
  }

  /**
   * What the native front needs to count held reloads into the same cells (docs/http.md "Blocking
   * reloads held in native code"): the shared cells, the caps, and each address's two cells.
   */
  nativeCaps(): { cells: Int32Array; maxTotal: number; maxPerAddress: number; cellsOf: (address: string) => [number, number] } {
    return { cells: new Int32Array(this.counter.memory), maxTotal: this.d.maxTotal, maxPerAddress: this.d.maxPerAddress, cellsOf: (address) => this.counter.cellsOf(address) };
  }

  /** Requests held now, in total or for one client address. */
  held(address?: string): number {
    return this.counter.held(address);
  }
}
