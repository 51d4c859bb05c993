/**
 * The jitter buffer in front of a WHIP publish (docs/behaviour.md "Go live over WHIP"): Opus RTP
 * packets (RFC 3550, RFC 7587) in the order the network delivers them; the Opus packets out in
 * sequence order, each with its time on the publish's own clock (RTP timestamp, 48 kHz, counted
 * from the first packet), and every gap filled, so that what the hub segments keeps the duration
 * the publisher played:
 * - a packet is held until the packets before it arrived, or for at most `delayMs` (then those
 *   missing are given up: counted `lost`);
 * - missing audio (lost packets, or a sender that skipped time — DTX, a pause) becomes Opus PLC
 *   frames: the TOC byte of the last packet with code 0 and no frame data, a zero-length frame that
 *   tells a decoder to conceal (RFC 6716 §3.2.1); at most `maxFillMs` of them per gap (a longer
 *   jump is taken as a new timeline: the output simply goes on);
 * - a packet that comes after its turn passed (late, duplicate) is dropped and counted.
 * Pure: no timers, no I/O. The caller passes the time and asks `deadline()` when to call `flush`.
 */
import { opusPacketSamples } from '../media/ogg.js';

/** What the buffer counts. */
export interface JitterStats {
  /** Packets taken in. */
  received: number;
  /** Packets that arrived after a later one (then put back in order). */
  reordered: number;
  /** Packets given up as lost (their audio was concealed). */
  lost: number;
  /** Packets dropped: late (their turn passed) or duplicates. */
  late: number;
  /** PLC frames made (lost packets, skipped time). */
  filled: number;
}

/** Settings. Times in ms. */
export interface JitterOptions {
  /** How long a packet waits for the ones before it. */
  delayMs: number;
  /** Longest gap filled with PLC frames (ms). */
  maxFillMs: number;
  /** Most packets held (a flood is released early). */
  maxPackets: number;
  /**
   * One Opus packet out, in order: `samples` its position in 48 kHz samples from the first packet,
   * `filled` a PLC frame made for missing audio.
   */
  out(samples: number, payload: Uint8Array, filled: boolean): void;
}

interface Held {
  ts: number;
  payload: Uint8Array;
  at: number;
}

const SEQ_SPAN = 0x10000;
/** A sequence number this far from the expected one starts a new run (a sender restart), not a wait. */
const SEQ_JUMP = 3000;

/** The jitter buffer of one publish. */
export class OpusJitterBuffer {
  readonly stats: JitterStats = { received: 0, reordered: 0, lost: 0, late: 0, filled: 0 };
  private readonly held = new Map<number, Held>();
  /** Extended sequence number of the next packet out; null before the first packet. */
  private nextSeq: number | null = null;
  /** Extended RTP timestamp where the next packet out should start. */
  private nextTs = 0;
  /** The output position (samples since the first packet): monotone. */
  private position = 0;
  private highestSeq = 0;
  /** The TOC byte of the last packet out (a PLC frame copies it). */
  private lastToc = -1;

  constructor(private readonly o: JitterOptions) {}

  /**
   * Takes one RTP packet: `seq` the 16-bit sequence number, `timestamp` the 32-bit RTP timestamp,
   * `payload` the Opus packet (not copied: the caller gives up the buffer); `now` in ms.
   */
  push(seq: number, timestamp: number, payload: Uint8Array, now: number): void {
    this.stats.received++;
    if (payload.length === 0) return;
    if (this.nextSeq === null) {
      this.nextSeq = this.highestSeq = seq;
      this.nextTs = timestamp;
    }
    const ext = this.extendSeq(seq);
    if (ext < this.nextSeq || this.held.has(ext)) {
      this.stats.late++;
      return;
    }
    if (ext - this.nextSeq > SEQ_JUMP) {
      // A new run of sequence numbers: what is held goes out, then the run starts here.
      this.flush(Number.POSITIVE_INFINITY);
      this.nextSeq = ext;
    }
    if (ext < this.highestSeq) this.stats.reordered++;
    else this.highestSeq = ext;
    this.held.set(ext, { ts: this.extendTs(timestamp), payload, at: now });
    if (this.held.size > this.o.maxPackets) this.flush(Number.POSITIVE_INFINITY, this.held.size - this.o.maxPackets);
    this.flush(now);
  }

  /**
   * Sends out what may go at `now`: packets in order, and past a gap that waited `delayMs` (the
   * missing ones given up). `force`: give up that many gaps whatever their wait.
   */
  flush(now: number, force = 0): void {
    for (;;) {
      if (this.nextSeq === null || this.held.size === 0) return;
      const h = this.held.get(this.nextSeq);
      if (h) {
        this.held.delete(this.nextSeq);
        this.nextSeq++;
        this.emit(h);
        continue;
      }
      let low = Number.POSITIVE_INFINITY;
      let oldest = Number.POSITIVE_INFINITY;
      for (const [s, x] of this.held) {
        if (s < low) low = s;
        if (x.at < oldest) oldest = x.at;
      }
      if (force <= 0 && now - oldest < this.o.delayMs) return;
      force--;
      this.stats.lost += low - this.nextSeq;
      this.nextSeq = low;
    }
  }

  /**
   * A new RTP source (another SSRC: the sender restarted its stream): what is held goes out, and
   * the next packet starts a new run of sequence numbers and timestamps; the output position goes
   * on from where it is (no gap is filled between the two runs).
   */
  restart(): void {
    this.flush(Number.POSITIVE_INFINITY, Number.POSITIVE_INFINITY);
    this.nextSeq = null;
  }

  /** When `flush` should next be called (ms, on the clock of `push`), or null when nothing waits. */
  deadline(): number | null {
    if (this.held.size === 0) return null;
    let oldest = Number.POSITIVE_INFINITY;
    for (const x of this.held.values()) if (x.at < oldest) oldest = x.at;
    return oldest + this.o.delayMs;
  }

  /** Packets held now. */
  size(): number {
    return this.held.size;
  }

  /** One packet out, after PLC frames for the audio missing before it. */
  private emit(h: Held): void {
    const samples = opusPacketSamples(h.payload);
    if (samples === 0) {
      this.stats.late++; // malformed: dropped like a packet that never came
      return;
    }
    const gap = h.ts - this.nextTs;
    if (this.lastToc >= 0 && gap > 0) {
      const plc = Uint8Array.of(this.lastToc & 0xfc);
      const frame = opusPacketSamples(plc);
      if (gap <= this.o.maxFillMs * 48) {
        for (let n = Math.round(gap / frame); n > 0; n--) {
          this.o.out(this.position, plc, true);
          this.stats.filled++;
          this.position += frame;
        }
      }
    }
    this.lastToc = h.payload[0]!;
    this.o.out(this.position, h.payload, false);
    this.position += samples;
    this.nextTs = h.ts + samples;
  }

  /** The 16-bit `seq` extended around the highest seen (RFC 3550 §A.1). */
  private extendSeq(seq: number): number {
    const ref = this.highestSeq;
    let d = (seq - (ref % SEQ_SPAN) + SEQ_SPAN) % SEQ_SPAN;
    if (d >= SEQ_SPAN / 2) d -= SEQ_SPAN;
    return ref + d;
  }

  /** The 32-bit RTP `timestamp` extended around where the next packet should start. */
  private extendTs(timestamp: number): number {
    const span = 2 ** 32;
    const ref = this.nextTs;
    let d = (timestamp - (((ref % span) + span) % span) + span) % span;
    if (d >= span / 2) d -= span;
    return ref + d;
  }
}
