/**
 * What a progressive listener (one HTTP GET of a live MP3 stream, docs/benchmarks.md "Players")
 * experienced over a bench's measuring window, judged the same way whether the server writes
 * small pieces often (Icecast: every MPEG audio frame, ~38 writes a second) or seconds of audio at
 * once (Skylark `/listen` on a 2 s-segment stream: one burst per segment).
 *
 * Two figures per listener, from the reads of its socket alone:
 *
 * - **rate over whole arrivals** (B/s): an *arrival* is a read and every read that follows within
 *   `groupMs` of it — one burst of the server that the kernel hands over in several reads is one
 *   arrival. The rate is the bytes of the arrivals after the window's first one, up to and with the
 *   last arrival that begins inside the window (all of its reads, even those a few ms after the
 *   window closed), over the time between the first and the last arrival's beginnings. Both ends
 *   sit at the same point of the server's write cycle, so a listener fed 2 s bursts at real time
 *   measures 16,000 B/s whether 4 or 5 bursts fell between the ends. A rate over a fixed window
 *   would move by a whole burst (2 s of 10: 20 %) with the window's phase.
 * - **lag** (ms): the player-buffer model. A player that joined at the window's first arrival, kept
 *   what arrived from then on, and started playing `X` ms later never runs dry (never stalls) while
 *   the audio received so far never falls behind the time elapsed by more than `X`. The lag is the
 *   largest such shortfall over the window: elapsed time since the first arrival minus the audio
 *   received since it (bytes ÷ the stream's bytes per second), taken just before each read and at
 *   the window's end; reads within `groupMs` before that first arrival (a burst's first part,
 *   read drained) count as received at their read time, and the elapsed time from the earliest
 *   of them. Real-time delivery in small pieces stays near 0 (one frame, ~26 ms); 2 s
 *   bursts at real time stay near 0 too (each burst arrives as the previous one is used up); a
 *   server that stops for 3 s reaches 3,000 ms, and one at 85 % of real time gains 150 ms a second.
 *
 * A listener is held (`listenerHeld`) when its rate is ≥ 95 % of the stream's (the average) and
 * its lag ≤ 1,000 ms (no stall), over a span of at least half the window. 1,000 ms is less than
 * either server's burst-on-connect (Skylark 2–4 s, docs/behaviour.md §10; Icecast 64 KB = 4 s at
 * 128 kbit/s) and equals VLC's default network caching, so a player holding that much never
 * stalls on a listener judged held.
 *
 * Reads come in one of two kinds (bench/lib/player-client.ts): *timed* reads (the bytes arrived
 * just now) and, with paced reads, *drained* reads (what waited in the kernel's receive buffer
 * since the read before: arrived at unknown times). A drained read never begins an arrival; one
 * outside its arrival's `groupMs` is counted with the next arrival (it arrived before that one).
 * The lag credits a drained read's bytes at its read time, so with paced reads it is pessimistic
 * by up to the pacing period.
 *
 * Times are ms on one clock (`Date.now()` in the client), sizes bytes, rates bytes per second.
 */

/** How a ListenerMeter measures one listener. */
export interface MeterOptions {
  /** The stream's rate (B/s): 16,000 for MP3 at 128 kbit/s. */
  bytesPerS: number;
  /** The measuring window (ms). */
  from: number;
  to: number;
  /** Measure only from this long after the listener's first byte (ms): a burst-on-connect is not the steady rate. */
  settleMs: number;
  /** Reads within this long of an arrival's first read belong to that arrival (ms). */
  groupMs: number;
}

/** What one listener measured. */
export interface ListenerRate {
  /** Bytes per second over whole arrivals (see the module comment); −1 when fewer than two arrivals began in the window. */
  rate: number;
  /** Seconds between the first and the last arrival the rate spans (0 when none). */
  spanS: number;
  /** Largest shortfall of the audio received behind the time elapsed since the window's first arrival (ms); NaN when no arrival began in the window. */
  lagMs: number;
  /** Arrivals that began in the window (the first included): about window ÷ 2 s for a server writing 2 s bursts whole. */
  arrivals: number;
  /** No first byte `settleMs` before the window opened (none at all, or later): the listener could not be measured from the window's start. */
  lateStart: boolean;
}

/** Reads within this long of an arrival's first read are that arrival, reading on every arrival (ms). Well under a 2 s write cycle, ~10 MPEG audio frames. */
export const GROUP_MS = 250;
/** The largest lag of a held listener (ms): a player's start-up buffer, see the module comment. */
export const MAX_LAG_MS = 1000;
/** The smallest share of the stream's rate a held listener receives. */
export const MIN_RATE_SHARE = 0.95;

/** The `groupMs` for a client reading every `readMs` (0: on every arrival): a pacing period's drained read still joins its arrival. */
export const groupMsFor = (readMs: number): number => (readMs > 0 ? Math.max(GROUP_MS, readMs + 100) : GROUP_MS);

/**
 * Measures one listener from its reads (`read` in the order they happen; `result` once the window
 * has closed and `groupMs` more has passed). O(1) time and memory per read. Never throws.
 */
export class ListenerMeter {
  private firstByteAt = -1;
  /** The current arrival: when it began, and whether its bytes count toward the rate (it began inside the window, after the first). */
  private groupAt = -Infinity;
  private groupCounts = false;
  /** The window's first arrival began at (−1: not yet); the last one inside the window began at. */
  private t0 = -1;
  private tLast = -1;
  /** Bytes of the arrivals after the first, up to the last begun in the window. */
  private sum = 0;
  /** Drained bytes read after their arrival's span: counted with the next arrival. */
  private pending = 0;
  /** Bytes read from the window's first arrival on (up to `to`), and the largest lag so far (ms). */
  private credit = 0;
  private lag = -Infinity;
  private arrivals = 0;
  /** The lag's reference: the window's first arrival, moved back to the earliest read within `groupMs` before it (see `begin`). */
  private lagFrom = -1;
  /** Flat [t, n, …] of the reads just before the window's first arrival (only while it has not begun, from `groupMs` before it could). */
  private recent: number[] = [];

  constructor(private readonly o: MeterOptions) {}

  /** One read of `n` body bytes at `now` (ms); `drained`: the bytes waited in the kernel since the read before (arrived at unknown times). */
  read(now: number, n: number, drained = false): void {
    if (n <= 0) return;
    if (this.firstByteAt < 0) this.firstByteAt = now;
    const { from, to, settleMs, groupMs } = this.o;
    if (now - this.groupAt < groupMs) {
      // Part of the current arrival (timed or drained).
      if (this.groupCounts) this.sum += n;
    } else if (!drained) {
      this.begin(now, now >= from && now <= to && now >= this.firstByteAt + settleMs);
      if (this.groupCounts) this.sum += n;
    } else if (this.t0 >= 0) {
      // Drained after its arrival's span: it arrived before the next arrival, and counts with it.
      this.pending += n;
    }
    if (this.t0 >= 0) {
      if (now <= to) {
        this.lag = Math.max(this.lag, now - this.lagFrom - (this.credit * 1000) / this.o.bytesPerS);
        this.credit += n;
      }
    } else if (now >= from - groupMs && now >= this.firstByteAt + settleMs - groupMs) {
      const r = this.recent;
      if (r.length >= 64) r.splice(0, r.length - 32);
      r.push(now, n);
    }
  }

  /** A timed read at `now` begins an arrival; `inWindow`: it begins inside the window (and after the settling time). */
  private begin(now: number, inWindow: boolean): void {
    this.groupAt = now;
    const first = inWindow && this.t0 < 0;
    this.groupCounts = inWindow && !first;
    if (inWindow) this.arrivals++;
    if (first) {
      // The reads within `groupMs` before it (a burst's first part, read drained after a paced
      // resume) were in the player's hands too: the lag counts from the earliest of them, with their bytes.
      this.t0 = now;
      this.lagFrom = now;
      this.credit = 0;
      const r = this.recent;
      for (let i = 0; i < r.length; i += 2) {
        if (r[i]! <= now - this.o.groupMs) continue;
        if (r[i]! < this.lagFrom) this.lagFrom = r[i]!;
        this.credit += r[i + 1]!;
      }
      this.recent = [];
      this.lag = now - this.lagFrom - (this.credit * 1000) / this.o.bytesPerS;
    } else if (this.groupCounts) {
      this.tLast = now;
      this.sum += this.pending;
    }
    this.pending = 0;
  }

  /** The rate, its span and the lag (see ListenerRate). */
  result(): ListenerRate {
    const base = { arrivals: this.arrivals, lateStart: this.firstByteAt < 0 || this.firstByteAt > this.o.from - this.o.settleMs };
    if (this.t0 < 0) return { rate: -1, spanS: 0, lagMs: NaN, ...base };
    const lagMs = Math.max(this.lag, this.o.to - this.lagFrom - (this.credit * 1000) / this.o.bytesPerS);
    if (this.tLast <= this.t0) return { rate: -1, spanS: 0, lagMs, ...base };
    const span = this.tLast - this.t0;
    return { rate: (this.sum * 1000) / span, spanS: span / 1000, lagMs, ...base };
  }
}

/**
 * Whether one listener was held: a rate ≥ `MIN_RATE_SHARE` of `bytesPerS` over a span of at least
 * `minSpanS`, and a lag ≤ `MAX_LAG_MS`. `why` is '' when held, else the first reason
 * (`unmeasured`, `slow`, `stalled`).
 */
export function listenerHeld(r: ListenerRate, bytesPerS: number, minSpanS: number): { held: boolean; why: '' | 'unmeasured' | 'slow' | 'stalled' } {
  if (!(r.rate >= 0) || !(r.spanS >= minSpanS) || !Number.isFinite(r.lagMs)) return { held: false, why: 'unmeasured' };
  if (r.rate < MIN_RATE_SHARE * bytesPerS) return { held: false, why: 'slow' };
  if (r.lagMs > MAX_LAG_MS) return { held: false, why: 'stalled' };
  return { held: true, why: '' };
}

/** Measures a whole series of reads at once: [time ms, bytes, drained?]… in order (tests, offline analysis). */
export function measureReads(reads: ReadonlyArray<readonly [number, number, boolean?]>, o: MeterOptions): ListenerRate {
  const m = new ListenerMeter(o);
  for (const [t, n, drained] of reads) m.read(t, n, drained ?? false);
  return m.result();
}

/** A step's listeners judged (summarizeListeners): counts by outcome and the spread of the figures. */
export interface StepListeners {
  held: number;
  unmeasured: number;
  /** Of the unmeasured: those without a first byte the settling time before the window opened (started late, or never). */
  unmeasuredLate: number;
  slow: number;
  stalled: number;
  /** Rates of the listeners measured over at least the minimum span (B/s): the slowest, the 1st percentile, the median. */
  rateMin: number;
  rateP1: number;
  rateP50: number;
  /** Lags of every listener with one (ms): median, 99th percentile, largest. */
  lagP50: number;
  lagP99: number;
  lagMax: number;
  /** Arrivals per measured listener in the window: median and largest. */
  arrivalsP50: number;
  arrivalsMax: number;
}

/** The `p`-th percentile (0–100) of `xs` by rank, NaN when empty. */
function percentile(xs: number[], p: number): number {
  if (xs.length === 0) return NaN;
  const s = Float64Array.from(xs).sort();
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
}

/** ListenerRate of many listeners as a load client reports them (JSON: index by listener; a null lag is none measured, `late` 1 is a late start). */
export interface StreamFigures {
  rates: number[];
  spans: number[];
  lags: Array<number | null>;
  arrivals: number[];
  late: number[];
}

/** The figures of `rs` as a report carries them. */
export function streamFigures(rs: ListenerRate[]): StreamFigures {
  return {
    rates: rs.map((r) => r.rate),
    spans: rs.map((r) => r.spanS),
    lags: rs.map((r) => (Number.isFinite(r.lagMs) ? Math.round(r.lagMs) : null)),
    arrivals: rs.map((r) => r.arrivals),
    late: rs.map((r) => (r.lateStart ? 1 : 0)),
  };
}

/** Judges every listener of a step with listenerHeld and summarises them. */
export function summarizeListeners(figures: StreamFigures, bytesPerS: number, minSpanS: number): StepListeners {
  const out: StepListeners = { held: 0, unmeasured: 0, unmeasuredLate: 0, slow: 0, stalled: 0, rateMin: NaN, rateP1: NaN, rateP50: NaN, lagP50: NaN, lagP99: NaN, lagMax: NaN, arrivalsP50: NaN, arrivalsMax: NaN };
  const measured: number[] = [];
  const lagged: number[] = [];
  const arrivals: number[] = [];
  const { rates, spans, lags } = figures;
  for (let i = 0; i < rates.length; i++) {
    const r: ListenerRate = { rate: rates[i]!, spanS: spans[i] ?? 0, lagMs: lags[i] ?? NaN, arrivals: figures.arrivals[i] ?? 0, lateStart: figures.late[i] === 1 };
    const h = listenerHeld(r, bytesPerS, minSpanS);
    if (h.held) out.held++;
    else out[h.why as 'unmeasured' | 'slow' | 'stalled']++;
    if (h.why === 'unmeasured' && r.lateStart) out.unmeasuredLate++;
    if (r.rate >= 0 && r.spanS >= minSpanS) {
      measured.push(r.rate);
      arrivals.push(r.arrivals);
    }
    if (Number.isFinite(r.lagMs)) lagged.push(r.lagMs);
  }
  for (const a of arrivals) if (!(a <= out.arrivalsMax)) out.arrivalsMax = a;
  out.arrivalsP50 = percentile(arrivals, 50);
  // A loop, not Math.min(...xs): 10⁵ arguments overflow the stack.
  for (const r of measured) if (!(r >= out.rateMin)) out.rateMin = r;
  for (const l of lagged) if (!(l <= out.lagMax)) out.lagMax = l;
  out.rateP1 = percentile(measured, 1);
  out.rateP50 = percentile(measured, 50);
  out.lagP50 = percentile(lagged, 50);
  out.lagP99 = percentile(lagged, 99);
  return out;
}
