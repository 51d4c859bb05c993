/**
 * Integrated loudness of a broadcast (docs/streams.md "Live loudness"), after ITU-R BS.1770-4 §2.8
 * (EBU R128): from the momentary loudness of 400 ms gating blocks with 75 % overlap, an absolute
 * gate at −70 LUFS, a relative gate 10 LU below the mean of the blocks above the absolute gate, and
 * the loudness of the mean energy of the blocks above both gates. A block of loudness `l` (LUFS)
 * has energy 10^((l + 0.691) / 10).
 *
 * Bounded like libebur128's histogram mode: blocks are counted in 0.1 LU bins from −70 to +10 LUFS
 * (louder ones in the top bin), each bin with the exact sum of its blocks' energies, so that means
 * are exact and only the relative gate is placed to the bin (a block is kept when its bin's centre
 * is above the gate). Memory is constant whatever the broadcast's length.
 */

/** The absolute gate (LUFS): blocks at or below it are ignored (BS.1770-4 §2.8, Γa). */
export const ABSOLUTE_GATE_LUFS = -70;
/** The relative gate below the mean loudness of the blocks above the absolute gate (LU, Γr). */
export const RELATIVE_GATE_LU = -10;
/** Bin width (LU). */
const BIN_LU = 0.1;
/** Bins from the absolute gate up to +10 LUFS. */
const BINS = Math.round((10 - ABSOLUTE_GATE_LUFS) / BIN_LU);

/** The energy (mean square, K-weighted) of a block of loudness `lufs`. */
function energy(lufs: number): number {
  return 10 ** ((lufs + 0.691) / 10);
}

/** The loudness (LUFS) of a mean energy `e`. */
function loudness(e: number): number {
  return -0.691 + 10 * Math.log10(e);
}

/** The gated blocks of one measurement (a broadcast), in 0.1 LU bins. */
export class LoudnessGate {
  private readonly counts = new Float64Array(BINS);
  private readonly energies = new Float64Array(BINS);
  private gated = 0;

  /** Blocks counted so far (above the absolute gate). */
  get blocks(): number {
    return this.gated;
  }

  /** Counts 400 ms blocks of momentary loudness `lufs` (LUFS); those at or below −70 LUFS, or not numbers, are ignored. */
  add(...lufs: number[]): void {
    for (const l of lufs) {
      if (!(l > ABSOLUTE_GATE_LUFS) || !Number.isFinite(l)) continue;
      const bin = Math.min(BINS - 1, Math.floor((l - ABSOLUTE_GATE_LUFS) / BIN_LU));
      this.counts[bin]! += 1;
      this.energies[bin]! += energy(l);
      this.gated++;
    }
  }

  /** The integrated loudness (LUFS) of the blocks so far, or null when none is above the absolute gate. */
  integrated(): number | null {
    if (this.gated === 0) return null;
    let sum = 0;
    for (const e of this.energies) sum += e;
    const relativeGate = loudness(sum / this.gated) + RELATIVE_GATE_LU;
    let kept = 0;
    let keptEnergy = 0;
    for (let i = 0; i < BINS; i++) {
      if (this.counts[i] === 0 || ABSOLUTE_GATE_LUFS + (i + 0.5) * BIN_LU <= relativeGate) continue;
      kept += this.counts[i]!;
      keptEnergy += this.energies[i]!;
    }
    return kept === 0 ? null : loudness(keptEnergy / kept);
  }
}
