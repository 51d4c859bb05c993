/**
 * `mediaFile` (src/delivery/hls/routes.ts): the media object file names HLS serves — `<seq>.m4s`,
 * `<seq>.ts`, `<seq>.<part>.m4s`, `init-<v>.mp4` — read without a regular expression, and every
 * other name refused (null), as the pattern `^(?:(\d{1,15})(?:\.(\d{1,4}))?\.(m4s|ts)|init-(\d{1,9})\.mp4)$`
 * reads them (a part of a `.ts` segment, which no layer has, is refused too).
 */
import { describe, expect, it } from 'vitest';
import { mediaFile } from '../../../../src/delivery/hls/routes.js';

describe('mediaFile', () => {
  it('reads segments, parts and init sections', () => {
    expect(mediaFile('12.m4s')).toEqual({ seq: 12, part: -1, ts: false, init: -1 });
    expect(mediaFile('12.ts')).toEqual({ seq: 12, part: -1, ts: true, init: -1 });
    expect(mediaFile('12.3.m4s')).toEqual({ seq: 12, part: 3, ts: false, init: -1 });
    expect(mediaFile('0.0.m4s')).toEqual({ seq: 0, part: 0, ts: false, init: -1 });
    expect(mediaFile('12.03.m4s')).toEqual({ seq: 12, part: 3, ts: false, init: -1 });
    expect(mediaFile('999999999999999.9999.m4s')).toEqual({ seq: 999999999999999, part: 9999, ts: false, init: -1 });
    expect(mediaFile('init-2.mp4')).toEqual({ seq: -1, part: -1, ts: false, init: 2 });
    expect(mediaFile('init-123456789.mp4')).toEqual({ seq: -1, part: -1, ts: false, init: 123456789 });
  });

  it('refuses every other name', () => {
    for (const f of ['', '.m4s', 'm4s', '12', '12.', '12.mp4', '12.m4', '12.m4sx', 'x12.m4s', '12a.m4s', '-1.m4s', '1e3.m4s', '12..m4s', '12.3.ts', '12.3.4.m4s', '12.12345.m4s', '1234567890123456.m4s', 'init-.mp4', 'init-1.m4s', 'init-x.mp4', 'init-1234567890.mp4', 'init-1.mp4x', '12.3.m4s?x', ' 12.m4s']) {
      expect(mediaFile(f), f).toBeNull();
    }
  });
});
