/**
 * Hits of the limits that protect the node (docs/behaviour.md §13): every cap a client runs into is
 * counted, and logged at most once per cause per minute — with the remote address and how many
 * hits the line stands for, never a key. One `Limits` per server; every part that enforces a cap
 * calls `hit`. Counters are read by `snapshot()` (tests, `GET /metrics`).
 */
import type { Logger } from '../logger.js';
import { addressGroup } from './address-key.js';

/**
 * The caps, by stable name (the `limit` label of `skylark_limit_hits_total`). Each maps to a
 * setting of `LimitSettings` (src/base/config.ts) or to a fixed protocol maximum.
 */
export type LimitCause =
  | 'rtmp_connections'
  | 'rtmp_connections_per_ip'
  | 'rtmp_publish_timeout'
  | 'rtmp_prepublish_bytes'
  | 'audio_frame_bytes'
  | 'segment_bytes'
  | 'whep_pending'
  | 'whep_pending_per_ip'
  | 'whep_offer_timeout'
  | 'whip_pending'
  | 'whip_pending_per_ip'
  | 'whip_offer_timeout'
  | 'whip_no_rtp'
  | 'http_held'
  | 'http_held_per_ip'
  | 'http_body_bytes'
  | 'disk_free'
  | 'database_busy'
  | 'database_error'
  | 'login_backoff'
  | 'icecast_connections'
  | 'icecast_connections_per_ip'
  | 'listen_connections'
  | 'listen_connections_per_ip'
  | 'listen_slow_client'
  | 'hls_sessions_per_ip'
  | 'edge_log_untrusted'
  | 'edge_log_unsigned'
  | 'http10_connections'
  | 'http10_connections_per_ip'
  | 'http10_head_timeout';

/** How often one cause may write a log line (ms). */
export const LIMIT_LOG_EVERY_MS = 60_000;

interface CauseState {
  count: number;
  /** When the last line for this cause was written (ms), or -Infinity. */
  loggedAt: number;
  /** Hits since that line. */
  suppressed: number;
}

/** Counts limit hits and rate-limits their log lines. */
export class Limits {
  private readonly causes = new Map<LimitCause, CauseState>();

  constructor(
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * Records one hit of `cause`. `remote` is the client's address (`ip` or `ip:port`, '' when
   * none applies, e.g. a full disk); `fields` add context (never a key or a token). Logs a
   * `warn` line unless this cause logged within the last minute.
   */
  hit(cause: LimitCause, remote: string, fields?: Record<string, unknown>): void {
    let s = this.causes.get(cause);
    if (!s) this.causes.set(cause, (s = { count: 0, loggedAt: -Infinity, suppressed: 0 }));
    s.count++;
    const t = this.now();
    if (t - s.loggedAt < LIMIT_LOG_EVERY_MS) {
      s.suppressed++;
      return;
    }
    this.log.warn('limit reached', { limit: cause, remote, ...fields, ...(s.suppressed > 0 ? { suppressedSinceLast: s.suppressed } : {}) });
    s.loggedAt = t;
    s.suppressed = 0;
  }

  /** Hits of `cause` so far. */
  count(cause: LimitCause): number {
    return this.causes.get(cause)?.count ?? 0;
  }

  /** Every cause hit so far with its count. */
  snapshot(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const [k, s] of this.causes) out[k] = s.count;
    return out;
  }
}

/**
 * Open things per client address, with a total: `tryAcquire` says whether one more fits under
 * both caps and, if so, counts it; `release` gives it back. O(1) per call. Pass the IP without the
 * port; addresses are counted by group (`addressGroup`, src/base/limits/address-key.ts: IPv4 as is,
 * IPv4-mapped IPv6 as IPv4, IPv6 by /64), so one /64 holds one address's share. The counts are
 * kept by exact group in a Map, so no address shares another group's count.
 */
export class PerAddressCounter {
  private readonly byAddress = new Map<string, number>();
  private total = 0;

  constructor(
    public maxTotal: number,
    public maxPerAddress: number,
  ) {}

  /** 'ok' (counted), or which cap refused it. */
  tryAcquire(address: string): 'ok' | 'total' | 'per_address' {
    if (this.total >= this.maxTotal) return 'total';
    const group = addressGroup(address);
    const n = this.byAddress.get(group) ?? 0;
    if (n >= this.maxPerAddress) return 'per_address';
    this.byAddress.set(group, n + 1);
    this.total++;
    return 'ok';
  }

  /** Gives back one acquired for `address`. */
  release(address: string): void {
    const group = addressGroup(address);
    const n = this.byAddress.get(group);
    if (n === undefined) return;
    if (n <= 1) this.byAddress.delete(group);
    else this.byAddress.set(group, n - 1);
    this.total--;
  }

  /** Held now, in total or for one address's group. */
  held(address?: string): number {
    return address === undefined ? this.total : (this.byAddress.get(addressGroup(address)) ?? 0);
  }
}
