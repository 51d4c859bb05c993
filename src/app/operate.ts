/**
 * The composition root's operator endpoints (docs/behaviour.md "Operating the node", docs/metrics.md):
 * `GET /metrics` (Prometheus text format, loopback or `SKYLARK_METRICS_TOKEN`), `GET /healthz`
 * and `GET /readyz`. The metrics are read at scrape time from what each plane counts already —
 * the listener registry, the Icecast port, the hubs, the held-request counter, the limits, the
 * webhook engine, the download counter, every HTTP thread's tally and the native HTTP front —
 * wired here, where every plane is in reach.
 */
import { statfsSync } from 'node:fs';
import type { Base } from './base.js';
import type { Services } from './control.js';
import type { Listeners } from '../delivery/listeners/room.js';
import type { IcecastServer } from '../live/ingest/icecast-server.js';
import type { MediaRegistry } from '../live/media/registry.js';
import { clientAddress, trustedProxies } from '../base/http/client-address.js';
import { httpFrontCounts } from '../native/http-front.js';
import { ffmpegPath } from '../base/ffmpeg.js';
import { sumTallies } from '../base/http/tally.js';
import { errorBody, statusLine, type DeferredReply, type RawReply, type RawRequestInfo } from '../base/http/server.js';
import { ApiError } from '../base/errors/errors.js';
import { NodeMetrics, type HttpCounts, type MetricsSources, type StreamIngest, type StreamListeners } from '../base/metrics/node-metrics.js';
import { metricsAccess } from '../base/metrics/access.js';
import { readiness, type HealthCheck } from '../base/metrics/health.js';

/** Whether the native HTTP hooks (docs/http.md "HTTP/1.0") are installed, and why not: the HTTP front's own status (src/native/http-front.ts `httpFrontStatus`). */
export type HttpFrontStatus = () => { installed: boolean; reason?: string | null };

/** What the operator endpoints read. */
export interface OperationsDeps {
  base: Base;
  room: Listeners;
  media: MediaRegistry;
  icecast: IcecastServer;
  /** WHEP's counts (RTP payload bytes sent to peers). */
  whep: { stats(): { payloadBytesSent: number } };
  services: Pick<Services, 'dispatch' | 'downloads'>;
  front: HttpFrontStatus;
}

const JSON_HEADERS: ReadonlyArray<readonly [string, string]> = [
  ['Content-Type', 'application/json; charset=utf-8'],
  ['Cache-Control', 'no-store'],
];
const json = (status: string, body: unknown, extra: ReadonlyArray<readonly [string, string]> = []): RawReply => ({ status, headers: [...JSON_HEADERS, ...extra], body: Buffer.from(JSON.stringify(body)) });

/**
 * Registers `/metrics`, `/healthz` and `/readyz` (GET and HEAD) on the main thread's HTTP server;
 * worker threads forward them here. @returns the metrics (tests, benches)
 */
export function mountOperations(d: OperationsDeps): NodeMetrics {
  const { http, config } = d.base;
  const metrics = new NodeMetrics({ sources: metricsSources(d), maxStreams: config.metricsMaxStreams });
  const trusted = trustedProxies(config.trustedProxies);
  const checks = healthChecks(d);
  for (const method of ['get', 'head'] as const) {
    http.raw(method, '/healthz', () => json('200 OK', { status: 'ok' }));
    http.raw(method, '/readyz', () => {
      const r = readiness(checks);
      return json(r.status === 200 ? '200 OK' : '503 Service Unavailable', r.body);
    });
  }
  http.raw('get', '/metrics', (_params, _query, requestId, info) => {
    const denied = metricsRefusal(info, requestId, trusted, config.metricsToken);
    return denied ?? new Scrape(metrics);
  });
  return metrics;
}

/**
 * The 401/403 answer to a scrape the client may not make (see src/base/metrics/access.ts), in the
 * error envelope of docs/behaviour.md "Errors": 401 `missing_token` with `WWW-Authenticate: Bearer`
 * (RFC 6750 §3), 403 `invalid_token` for a wrong token, 403 `insufficient_scope` when no token is
 * set; or null when it may.
 */
function metricsRefusal(info: RawRequestInfo, requestId: string, trusted: ReturnType<typeof trustedProxies>, token: string | undefined): RawReply | null {
  const client = clientAddress(info.remoteAddress(), info.header('x-forwarded-for'), trusted);
  const decision = metricsAccess(client, info.header('authorization'), token);
  if (decision === 200) return null;
  const err =
    decision === 401
      ? new ApiError('missing_token', 'GET /metrics needs Authorization: Bearer <SKYLARK_METRICS_TOKEN> from outside loopback.', { headers: { 'WWW-Authenticate': 'Bearer realm="metrics"' } })
      : token === undefined
        ? new ApiError('insufficient_scope', 'GET /metrics answers loopback clients only: this node has no SKYLARK_METRICS_TOKEN.')
        : new ApiError('invalid_token', 'The bearer token is not this node\'s SKYLARK_METRICS_TOKEN.', { status: 403 });
  return json(statusLine(err.status), errorBody(err, requestId), Object.entries(err.headers));
}

/** One scrape, answered once the metrics are rendered (a `DeferredReply`: the render is asynchronous). */
class Scrape implements DeferredReply {
  private cancelled = false;

  constructor(private readonly metrics: NodeMetrics) {}

  defer(to: Parameters<DeferredReply['defer']>[0]): void {
    this.metrics.scrape().then(
      (text) => {
        if (!this.cancelled) to.answer(() => ({ status: '200 OK', headers: [['Content-Type', this.metrics.contentType], ['Cache-Control', 'no-store']], body: Buffer.from(text) }));
      },
      (e: unknown) => {
        if (!this.cancelled) to.answer(() => json('500 Internal Server Error', { error: { type: 'api_error', code: 'internal_error', message: `The metrics could not be read: ${e instanceof Error ? e.message : String(e)}` } }));
      },
    );
  }

  cancel(): void {
    this.cancelled = true;
  }
}

/** The readiness checks of docs/behaviour.md "Operating the node", in the order `/readyz` lists them. */
function healthChecks(d: OperationsDeps): HealthCheck[] {
  const { db, config } = d.base;
  const bound = (name: 'http' | 'rtmp' | 'icecast'): HealthCheck => ({
    name,
    run: () => (d.base.listening.ports ? null : `the ${name === 'http' ? 'HTTP' : name === 'rtmp' ? 'RTMP' : 'Icecast'} listener is not bound`),
  });
  return [
    {
      name: 'database',
      run() {
        if (db.readonly) return 'the database is open read-only';
        // Takes the write lock and gives it back: fails when another writer holds it past the busy timeout.
        db.exec('BEGIN IMMEDIATE');
        db.exec('ROLLBACK');
        return null;
      },
    },
    {
      name: 'disk',
      run() {
        const s = statfsSync(config.dataDir);
        const free = s.bavail * s.bsize;
        const floor = config.limits.minFreeDiskBytes;
        return free >= floor ? null : `${free} bytes free on the data volume, under the floor of ${floor} (SKYLARK_MIN_FREE_DISK_BYTES)`;
      },
    },
    { name: 'ffmpeg', run: () => (ffmpegPath() ? null : 'FFmpeg was not found (install ffmpeg or set SKYLARK_FFMPEG)') },
    bound('http'),
    bound('rtmp'),
    bound('icecast'),
    {
      name: 'http_front',
      gating: false,
      run() {
        const s = d.front();
        return s.installed ? null : `the native HTTP hooks are not installed: ${s.reason ?? 'unknown reason'}`;
      },
    },
  ];
}

/** The metrics' sources over the planes (see the module comment). */
function metricsSources(d: OperationsDeps): MetricsSources {
  const { base, room, media, icecast, services } = d;
  const pending = base.db.prepare("SELECT COUNT(*) FROM webhook_deliveries WHERE status = 'pending'").pluck();
  return {
    listeners: () => listenerCounts(room, media, icecast),
    ingest: () => ingestNow(media, base.now()),
    http: () => httpCounts(d),
    heldReloads: () => room.held.held(),
    refusals: () => base.limits.snapshot(),
    webhookDeliveries: () => ({ ...services.dispatch.engine.outcomes }),
    webhookQueueDepth: () => pending.get() as number,
    downloadsCounted: () => services.downloads.counter?.countedTotal ?? 0,
    ffmpegProcesses: () => process.getActiveResourcesInfo().filter((r) => r === 'ProcessWrap').length,
  };
}

/**
 * Listeners by stream and protocol label: HLS sessions of a stream with LL-HLS parts are `ll_hls`;
 * progressive listeners are `icecast` as many as the Icecast port serves, the rest `listen`.
 */
function listenerCounts(room: Listeners, media: MediaRegistry, icecast: IcecastServer): StreamListeners[] {
  const out: StreamListeners[] = [];
  for (const { streamId, protocol, count } of room.registry.byProtocol()) {
    if (protocol === 'hls') {
      const hub = media.get(streamId);
      out.push({ stream: streamId, protocol: hub && hub.opts.partTargetMs > 0 ? 'll_hls' : 'hls', count });
    } else if (protocol === 'webrtc') out.push({ stream: streamId, protocol: 'webrtc', count });
    else {
      const onPort = Math.min(count, icecast.listenersByStream.get(streamId) ?? 0);
      if (onPort > 0) out.push({ stream: streamId, protocol: 'icecast', count: onPort });
      if (count > onPort) out.push({ stream: streamId, protocol: 'listen', count: count - onPort });
    }
  }
  return out;
}

/** Every open hub's ingest state. */
function ingestNow(media: MediaRegistry, now: number): StreamIngest[] {
  const out: StreamIngest[] = [];
  for (const [stream, hub] of media.current()) if (!hub.ended) out.push({ stream, live: hub.ingestLive, kbps: hub.ingestKbps(now) });
  return out;
}

/** Requests and bytes of the main thread, every worker thread (asked now) and the native HTTP front. */
async function httpCounts(d: OperationsDeps): Promise<HttpCounts> {
  const all = [d.base.http.replies.tally.nonZero()];
  const threads = d.base.listening.threads;
  if (threads) for (const c of (await threads.counts()).values()) if (c.http) all.push(c.http);
  const sums = sumTallies(all);
  // LL-HLS parts answered natively (docs/http.md "Media objects answered in native code"): 200 each.
  const native = httpFrontCounts().objectHits;
  if (native > 0) sums.requests.push({ route: 'hls_part', status: 200, count: native });
  const b = sums.bytes;
  return {
    requests: sums.requests,
    bytes: {
      hls: (b.hls_playlist ?? 0) + (b.hls_segment ?? 0) + (b.hls_part ?? 0),
      listen: b.listen ?? 0,
      icecast: d.icecast.listenerBytes(),
      webrtc: d.whep.stats().payloadBytesSent,
    },
  };
}
