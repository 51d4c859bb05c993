/**
 * The catch-up playlists' render cache (src/delivery/catch-up/routes.ts): bounded in entries and
 * in characters, oldest out first; a text longer than half the bound is answered and not kept —
 * so requests for many long spans cannot make the node hold them all.
 */
import { describe, expect, it } from 'vitest';
import { RenderCache } from '../../../../src/delivery/catch-up/routes.js';

describe('the catch-up render cache', () => {
  it('renders once per key while kept', () => {
    const c = new RenderCache(4, 1000);
    let renders = 0;
    const r = () => (renders++, 'x'.repeat(10));
    c.get('a', r);
    c.get('a', r);
    expect(renders).toBe(1);
  });

  it('keeps at most its characters and entries, oldest out first, and never a text over half its bound', () => {
    const c = new RenderCache(3, 100);
    for (const k of ['a', 'b', 'c', 'd']) c.get(k, () => 'y'.repeat(30));
    expect(c.size).toBe(90); // three entries: 'a' went first
    let again = 0;
    c.get('a', () => (again++, 'y'.repeat(30)));
    expect(again).toBe(1);
    c.get('big', () => 'z'.repeat(60));
    expect(c.size).toBeLessThanOrEqual(100);
    let big = 0;
    c.get('big', () => (big++, 'z'.repeat(60)));
    expect(big).toBe(1); // not kept: rendered again
    for (let i = 0; i < 50; i++) c.get(`k${i}`, () => 'w'.repeat(45));
    expect(c.size).toBeLessThanOrEqual(100);
  });
});
