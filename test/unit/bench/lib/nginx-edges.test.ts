/**
 * The origin-fetch count read from an edge's access log (bench/lib/nginx-edges.ts `countFetches`):
 * lines in the `skylark_edge_file` format that `skylark edge-config --access-log` writes.
 */
import { describe, expect, it } from 'vitest';
import { countFetches } from '../../../../bench/lib/nginx-edges.js';

const part = '/hls/stm_a/a128/13.2.m4s';
const line = (at: number, target: string, cache: string, ustatus: string, upstream: string) =>
  `${at.toFixed(3)} 8.8.8.8 "GET ${target} HTTP/1.1" 200 8489 cache=${cache} rt=0.001 ustatus=${ustatus} urt=0.001 upstream=${upstream}`;

describe('countFetches', () => {
  it('counts one fetch per attempt the origin answered, keyed as the cache keys them', () => {
    const log = [
      line(1, part, 'MISS', '200', '127.0.0.1:8080'),
      line(1.1, part, 'HIT', '-', '-'),
      line(1.2, '/hls/stm_a/a128/index.m3u8?_HLS_msn=13&_HLS_part=3&sid=x', 'MISS', '200', '127.0.0.1:8080'),
      line(1.3, '/hls/stm_a/index.m3u8', '-', '200', '127.0.0.1:8080'),
    ].join('\n');
    const f = countFetches(log, 0, Infinity);
    expect(f.objects.get(part)).toBe(1);
    expect(f.blocking.get('/hls/stm_a/a128/index.m3u8?_HLS_msn=13&_HLS_part=3')).toBe(1);
    expect(f.passed).toBe(1);
    expect(f.total).toBe(3);
    expect(f.retried).toBe(0);
    expect(f.requests).toBe(4);
  });

  it('does not count an attempt on a kept-alive connection the origin had closed (502, then another attempt)', () => {
    const f = countFetches(line(1, part, 'MISS', '502, 200', '127.0.0.1:8080, 127.0.0.1:8080'), 0, Infinity);
    expect(f.objects.get(part)).toBe(1);
    expect(f.retried).toBe(1);
    expect(f.total).toBe(1);
  });

  it('counts two attempts the origin answered as two fetches', () => {
    const f = countFetches(line(1, part, 'MISS', '504, 200', '127.0.0.1:8080, 127.0.0.1:8080'), 0, Infinity);
    expect(f.objects.get(part)).toBe(2);
    expect(f.retried).toBe(0);
  });
});
