/**
 * The statistics range rules (docs/podcasts.md "Download counting"): the last 30 UTC days by
 * default, a range around one given end, at most 366 days, `from` not after `to`, real dates only.
 */
import { describe, expect, it } from 'vitest';
import { PodcastStatsService } from '../../../../src/control/services/podcast-stats.js';
import { ApiError } from '../../../../src/base/errors/errors.js';

const now = Date.parse('2026-03-10T23:59:59Z');
const svc = new PodcastStatsService({ downloads: {} as never, podcasts: {} as never, flush: () => {}, now: () => now });

describe('PodcastStatsService.range', () => {
  it('defaults to the 30 days up to today, or around the one end given', () => {
    expect(svc.range({})).toEqual({ from: '2026-02-09', to: '2026-03-10' });
    expect(svc.range({ to: '2026-01-31' })).toEqual({ from: '2026-01-02', to: '2026-01-31' });
    expect(svc.range({ from: '2026-03-01' })).toEqual({ from: '2026-03-01', to: '2026-03-10' });
    expect(svc.range({ from: '2025-01-01' })).toEqual({ from: '2025-01-01', to: '2025-01-30' });
    expect(svc.range({ from: '2026-04-01' })).toEqual({ from: '2026-04-01', to: '2026-04-01' });
    expect(svc.range({ from: '2025-03-10', to: '2026-03-10' })).toEqual({ from: '2025-03-10', to: '2026-03-10' }); // 366 days
  });

  it('refuses a range over 366 days, from after to, and dates that do not exist', () => {
    const param = (q: { from?: string; to?: string }) => {
      try {
        svc.range(q);
        return null;
      } catch (e) {
        expect(e).toBeInstanceOf(ApiError);
        expect((e as ApiError).code).toBe('parameter_invalid');
        return (e as ApiError).param;
      }
    };
    expect(param({ from: '2025-03-09', to: '2026-03-10' })).toBe('to');
    expect(param({ from: '2026-03-11', to: '2026-03-10' })).toBe('from');
    expect(param({ from: '2026-02-29' })).toBe('from');
    expect(param({ to: '2026-3-1' })).toBe('to');
    expect(param({ to: '2026-03-10T00:00:00Z' })).toBe('to');
  });
});
