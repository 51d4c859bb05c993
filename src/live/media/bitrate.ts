/**
 * Ingest bitrate watch (docs/behaviour.md §2): the measured ingest bitrate above 1.5 × nominal over 5 s
 * raises a `bitrate_spike`, at most once a minute; the stream stays live.
 */

/** Settings. Bitrates in kbps, durations in ms. */
export interface BitrateMonitorOptions {
  nominalKbps: number;
  /** Ratio over nominal that counts as a spike (1.5). */
  factor?: number;
  /** The window the average is taken over (5000 ms). */
  windowMs?: number;
  /** The least time between two spikes reported (60000 ms). */
  cooldownMs?: number;
}

/** A spike report: the measured average over the window and the nominal bitrate (kbps). */
export interface BitrateSpike {
  measuredKbps: number;
  nominalKbps: number;
}

const BUCKET_MS = 250;

/**
 * Bytes per 250 ms bucket over a sliding window, so a check is O(window / 250 ms) and memory is
 * fixed. Feed it the size of every ingest audio message with the wall-clock time it arrived.
 */
export class BitrateMonitor {
  private readonly factor: number;
  private readonly windowMs: number;
  private readonly cooldownMs: number;
  private readonly buckets: Float64Array;
  private readonly stamps: Float64Array;
  private firstAt = -1;
  private lastSpikeAt = -Infinity;

  constructor(private readonly o: BitrateMonitorOptions) {
    this.factor = o.factor ?? 1.5;
    this.windowMs = o.windowMs ?? 5000;
    this.cooldownMs = o.cooldownMs ?? 60_000;
    const n = Math.ceil(this.windowMs / BUCKET_MS);
    this.buckets = new Float64Array(n);
    this.stamps = new Float64Array(n).fill(-1);
  }

  /** Counts `bytes` received at `nowMs`; returns a spike when one is due. */
  add(bytes: number, nowMs: number): BitrateSpike | null {
    if (this.firstAt < 0) this.firstAt = nowMs;
    const slot = Math.floor(nowMs / BUCKET_MS);
    const i = slot % this.buckets.length;
    if (this.stamps[i] !== slot) {
      this.stamps[i] = slot;
      this.buckets[i] = 0;
    }
    this.buckets[i]! += bytes;
    if (nowMs - this.firstAt < this.windowMs) return null; // not a full window yet
    if (nowMs - this.lastSpikeAt < this.cooldownMs) return null;
    const kbps = this.measuredKbps(nowMs);
    if (kbps <= this.o.nominalKbps * this.factor) return null;
    this.lastSpikeAt = nowMs;
    return { measuredKbps: Math.round(kbps), nominalKbps: this.o.nominalKbps };
  }

  /** Average over the last window (kbps). */
  measuredKbps(nowMs: number): number {
    const slot = Math.floor(nowMs / BUCKET_MS);
    const oldest = slot - this.buckets.length + 1;
    let total = 0;
    for (let i = 0; i < this.buckets.length; i++) if (this.stamps[i]! >= oldest && this.stamps[i]! <= slot) total += this.buckets[i]!;
    return (total * 8) / this.windowMs;
  }
}
