// The dashboard's durations (broadcasts table, average listen): whole seconds first, never "1 min 60 s".
import { describe, expect, it } from 'vitest';
import { formatDuration } from '../../../../src/control/dashboard/stream-cards.js';

describe('formatDuration', () => {
  it.each([
    [0, '0 s'],
    [-3, '0 s'],
    [Number.NaN, '0 s'],
    [0.4, '0 s'],
    [59.4, '59 s'],
    [59.6, '1 min 0 s'],
    [119.6, '2 min 0 s'],
    [192, '3 min 12 s'],
    [3599.5, '1 h 0 min'],
    [3725, '1 h 2 min'],
  ])('%s s → %s', (seconds, text) => {
    expect(formatDuration(seconds)).toBe(text);
  });
});
