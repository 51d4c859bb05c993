/**
 * The pure parts of `GET /metrics` (docs/metrics.md): who may scrape (src/base/metrics/access.ts),
 * which streams keep their own label under the cap (src/base/metrics/node-metrics.ts `keptStreams`),
 * the route class of a request (src/base/http/tally.ts), and the capped exposition of a registry
 * over plain sources.
 */
import { describe, expect, it } from 'vitest';
import { isLoopback, metricsAccess } from '../../../../src/base/metrics/access.js';
import { keptStreams, NodeMetrics, type MetricsSources } from '../../../../src/base/metrics/node-metrics.js';
import { HttpTally, RC, routeClassOf, statusOf, sumTallies } from '../../../../src/base/http/tally.js';
import { readiness } from '../../../../src/base/metrics/health.js';
import { ConfigError, loadConfig } from '../../../../src/base/config.js';

describe('metricsAccess', () => {
  it('lets loopback in in every spelling, and nobody else without the token', () => {
    for (const ip of ['127.0.0.1', '127.0.0.2', '::1', '0000:0000:0000:0000:0000:0000:0000:0001', '::ffff:127.0.0.1', '0000:0000:0000:0000:0000:ffff:127.0.0.1']) expect(isLoopback(ip), ip).toBe(true);
    for (const ip of ['10.0.0.1', '203.0.113.7', '::2', '', 'garbage', '::ffff:10.0.0.1']) expect(isLoopback(ip), ip).toBe(false);
    expect(metricsAccess('203.0.113.7', '', undefined)).toBe(403);
    expect(metricsAccess('203.0.113.7', 'Bearer x', undefined)).toBe(403);
    expect(metricsAccess('203.0.113.7', '', 'secret-token-0123456')).toBe(401);
    expect(metricsAccess('203.0.113.7', 'Bearer nope', 'secret-token-0123456')).toBe(403);
    expect(metricsAccess('203.0.113.7', 'Basic c2VjcmV0', 'secret-token-0123456')).toBe(403);
    expect(metricsAccess('203.0.113.7', 'Bearer secret-token-0123456', 'secret-token-0123456')).toBe(200);
    expect(metricsAccess('203.0.113.7', 'bearer secret-token-0123456', 'secret-token-0123456')).toBe(200);
  });
});

describe('keptStreams', () => {
  it('keeps the busiest streams, then live streams without listeners, up to the cap', () => {
    const listeners = [
      { stream: 'b', protocol: 'hls' as const, count: 5 },
      { stream: 'a', protocol: 'listen' as const, count: 2 },
      { stream: 'a', protocol: 'hls' as const, count: 4 },
      { stream: 'c', protocol: 'webrtc' as const, count: 1 },
    ];
    const ingest = [{ stream: 'z', live: true, kbps: 1 }, { stream: 'y', live: true, kbps: 1 }, { stream: 'b', live: true, kbps: 1 }];
    expect([...keptStreams(listeners, ingest, 2)]).toEqual(['a', 'b']);
    expect([...keptStreams(listeners, ingest, 4)]).toEqual(['a', 'b', 'c', 'y']);
  });
});

describe('route classes', () => {
  it('classes paths and patterns', () => {
    expect(routeClassOf('/v2/streams')).toBe(RC.api);
    expect(routeClassOf('/hls/str_1/index.m3u8')).toBe(RC.hls_playlist);
    expect(routeClassOf('/hls/str_1/a128/index.m3u8')).toBe(RC.hls_playlist);
    expect(routeClassOf('/hls/str_1/a128/12.m4s')).toBe(RC.hls_segment);
    expect(routeClassOf('/hls/str_1/a128/init-1.mp4')).toBe(RC.hls_segment);
    expect(routeClassOf('/hls/str_1/a128/12.3.m4s')).toBe(RC.hls_part);
    expect(routeClassOf('/listen/:file')).toBe(RC.listen);
    expect(routeClassOf('/dashboard/streams')).toBe(RC.dashboard);
    expect(routeClassOf('/oauth/token')).toBe(RC.oauth);
    expect(routeClassOf('/metrics')).toBe(RC.other);
    expect(statusOf('404 Not Found')).toBe(404);
    expect(statusOf(Buffer.from('200 OK'))).toBe(200);
    expect(statusOf(Buffer.from('OK'))).toBe(0);
  });

  it('sums the tallies of several servers', () => {
    const a = new HttpTally();
    const b = new HttpTally();
    a.add(RC.hls_part, 200);
    b.add(RC.hls_part, 200);
    b.add(RC.api, 404);
    a.add(RC.api, 99); // not a status: not counted
    b.bytes[RC.listen] = 1000;
    const s = sumTallies([a.nonZero(), b.nonZero()]);
    expect(s.requests).toEqual([{ route: 'api', status: 404, count: 1 }, { route: 'hls_part', status: 200, count: 2 }]);
    expect(s.bytes).toEqual({ listen: 1000 });
  });
});

describe('NodeMetrics', () => {
  it('sums the streams past the cap as stream="other"', async () => {
    const sources: MetricsSources = {
      listeners: () => Array.from({ length: 5 }, (_, i) => ({ stream: `str_${i}`, protocol: 'listen' as const, count: i + 1 })),
      ingest: () => Array.from({ length: 5 }, (_, i) => ({ stream: `str_${i}`, live: true, kbps: 100 })),
      http: async () => ({ requests: [], bytes: {} }),
      heldReloads: () => 0,
      refusals: () => ({ listen_connections: 3 }),
      webhookDeliveries: () => ({ delivered: 1 }),
      webhookQueueDepth: () => 0,
      downloadsCounted: () => 7,
      ffmpegProcesses: () => 0,
    };
    const text = await new NodeMetrics({ sources, maxStreams: 2, defaults: false }).scrape();
    expect(text).toContain('skylark_listeners{stream="str_4",protocol="listen"} 5');
    expect(text).toContain('skylark_listeners{stream="str_3",protocol="listen"} 4');
    expect(text).toContain('skylark_listeners{stream="other",protocol="listen"} 6');
    expect(text).toContain('skylark_ingest_live{stream="other"} 3');
    expect(text).toContain('skylark_ingest_bitrate_kbps{stream="other"} 300');
    expect(text).toContain('skylark_refusals_total{limit="listen_connections"} 3');
    expect(text).toContain('skylark_downloads_counted_total 7');
    expect(text).not.toContain('str_2');
  });
});

describe('readiness', () => {
  it('fails on a gating check only, naming it, and counts a throw as a failure', () => {
    const r = readiness([
      { name: 'a', run: () => null },
      { name: 'b', run: () => { throw new Error('boom'); } },
      { name: 'c', gating: false, run: () => 'not there' },
    ]);
    expect(r.status).toBe(503);
    expect(r.body.failed).toEqual(['b']);
    expect(r.body.checks[1]).toEqual({ name: 'b', ok: false, gating: true, reason: 'boom' });
    expect(readiness([{ name: 'c', gating: false, run: () => 'x' }]).status).toBe(200);
  });
});

describe('settings', () => {
  it('reads SKYLARK_METRICS_TOKEN and SKYLARK_METRICS_MAX_STREAMS, refusing bad values by name', () => {
    const c = loadConfig({});
    expect(c.metricsToken).toBeUndefined();
    expect(c.metricsMaxStreams).toBe(100);
    const set = loadConfig({ SKYLARK_METRICS_TOKEN: 'abcdefghijklmnop-1', SKYLARK_METRICS_MAX_STREAMS: '5' });
    expect(set.metricsToken).toBe('abcdefghijklmnop-1');
    expect(set.metricsMaxStreams).toBe(5);
    expect(loadConfig({}, { 'metrics-max-streams': '7' }).metricsMaxStreams).toBe(7);
    expect(() => loadConfig({ SKYLARK_METRICS_TOKEN: 'short' })).toThrow(ConfigError);
    expect(() => loadConfig({ SKYLARK_METRICS_TOKEN: 'has a space in it ok' })).toThrow(/SKYLARK_METRICS_TOKEN/);
    expect(() => loadConfig({ SKYLARK_METRICS_MAX_STREAMS: '0' })).toThrow(/SKYLARK_METRICS_MAX_STREAMS/);
  });
});
