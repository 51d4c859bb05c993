import { describe, expect, it } from 'vitest';
import { LoudnessGate } from '../../../../src/control/services/integrated-loudness.js';

/** BS.1770-4 §2.8 by the book, on a list of block loudness values (LUFS): the reference. */
function reference(blocks: number[]): number | null {
  const e = (l: number) => 10 ** ((l + 0.691) / 10);
  const l = (x: number) => -0.691 + 10 * Math.log10(x);
  const abs = blocks.filter((b) => b > -70);
  if (abs.length === 0) return null;
  const gate = l(abs.reduce((s, b) => s + e(b), 0) / abs.length) - 10;
  const rel = abs.filter((b) => b > gate);
  return l(rel.reduce((s, b) => s + e(b), 0) / rel.length);
}

describe('LoudnessGate (BS.1770-4 gating)', () => {
  it('gives nothing before a block above the absolute gate', () => {
    const g = new LoudnessGate();
    expect(g.integrated()).toBeNull();
    g.add(-70, -80, -120.7, Number.NaN, Number.NEGATIVE_INFINITY);
    expect(g.integrated()).toBeNull();
    expect(g.blocks).toBe(0);
  });

  it('gives the level of constant blocks', () => {
    const g = new LoudnessGate();
    for (let i = 0; i < 100; i++) g.add(-23);
    expect(g.integrated()).toBeCloseTo(-23, 9);
    const loud = new LoudnessGate();
    loud.add(-16, -16, -16);
    expect(loud.integrated()).toBeCloseTo(-16, 9);
  });

  it('ignores blocks at or below −70 LUFS (absolute gate)', () => {
    const g = new LoudnessGate();
    g.add(-20, -20, -75, -90, -120.7, -70);
    expect(g.integrated()).toBeCloseTo(-20, 9);
    expect(g.blocks).toBe(2);
  });

  it('ignores blocks more than 10 LU below the mean of the rest (relative gate)', () => {
    // Mean energy of 10 × −20 and 10 × −40 is ≈ −23 LUFS: the gate at ≈ −33 drops the −40 blocks.
    const g = new LoudnessGate();
    for (let i = 0; i < 10; i++) g.add(-20, -40);
    expect(g.integrated()).toBeCloseTo(-20, 9);
    // −28 is above that gate: it counts, and pulls the result down.
    const h = new LoudnessGate();
    for (let i = 0; i < 10; i++) h.add(-20, -28);
    const expected = -0.691 + 10 * Math.log10((10 ** ((-20 + 0.691) / 10) + 10 ** ((-28 + 0.691) / 10)) / 2);
    expect(h.integrated()).toBeCloseTo(expected, 9);
    expect(h.integrated()).toBeCloseTo(reference(Array.from({ length: 20 }, (_, i) => (i % 2 ? -28 : -20)))!, 9);
  });

  it('matches the standard on varied programme within 0.05 LU', () => {
    let seed = 7;
    const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    const blocks = Array.from({ length: 5000 }, (_, i) => -30 + 12 * Math.sin(i / 50) + 6 * rnd() - (i % 700 < 60 ? 50 : 0));
    const g = new LoudnessGate();
    g.add(...blocks);
    expect(Math.abs(g.integrated()! - reference(blocks)!)).toBeLessThan(0.05);
  });

  it('counts blocks louder than +10 LUFS in its top bin', () => {
    const g = new LoudnessGate();
    g.add(12);
    expect(g.integrated()).toBeCloseTo(12, 9);
  });
});
