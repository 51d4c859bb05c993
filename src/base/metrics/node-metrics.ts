/**
 * The node's metrics (docs/metrics.md), in the Prometheus text exposition format 0.0.4 from
 * prom-client (the only home of that library). Nothing here runs per request: every metric is read
 * at scrape time from counts the node keeps anyway (the listener registry, the held-request
 * counter, the limits, the webhook engine, the download counter, the HTTP servers' tallies), by
 * `collect()` callbacks over one snapshot taken at the start of each scrape.
 *
 * Per-stream labels are capped (`maxStreams`): the busiest streams by listeners (then live
 * streams without listeners) keep their own `stream` label; the rest are summed as
 * `stream="other"`, so a node with any number of streams exposes a bounded number of series.
 */
import client from 'prom-client';

/** How a listener listens, as the `protocol` label says (docs/metrics.md "Listeners"). */
export type ListenerProtocolLabel = 'hls' | 'll_hls' | 'listen' | 'icecast' | 'webrtc' | 'catch_up';

/** Listeners of one stream over one protocol. */
export interface StreamListeners {
  stream: string;
  protocol: ListenerProtocolLabel;
  count: number;
}

/** One stream's ingest now. */
export interface StreamIngest {
  stream: string;
  /** A publisher is live (codec checked, first frame in). */
  live: boolean;
  /** Ingest audio bitrate over the last 5 s (kbps); 0 when nobody publishes. */
  kbps: number;
}

/** Answers counted over every HTTP thread (src/base/http/tally.ts). */
export interface HttpCounts {
  requests: Array<{ route: string; status: number; count: number }>;
  /** Body bytes by protocol label (`hls`, `listen`, `icecast`, …). */
  bytes: Partial<Record<string, number>>;
}

/** Where the metrics are read from at scrape time (the composition root builds it). */
export interface MetricsSources {
  listeners(): Iterable<StreamListeners>;
  ingest(): Iterable<StreamIngest>;
  /** Requests and bytes of every HTTP thread and of the native HTTP front; may ask worker threads (async). */
  http(): Promise<HttpCounts>;
  /** LL-HLS requests held now (blocking playlist reloads and part waits), node-wide. */
  heldReloads(): number;
  /** Hits of each limit of docs/behaviour.md §13 so far, by name. */
  refusals(): Record<string, number>;
  /** Webhook attempts committed so far, by outcome. */
  webhookDeliveries(): Record<string, number>;
  /** Webhook deliveries pending (due now or waiting for a retry). */
  webhookQueueDepth(): number;
  /** Podcast downloads counted so far (docs/podcasts.md "Download counting"). */
  downloadsCounted(): number;
  /** FFmpeg processes running now. */
  ffmpegProcesses(): number;
}

/** prom-client default metrics left out (see `NodeMetrics`). */
const LINT_REFUSED_DEFAULTS = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'];

/** The stream label of everything past the cap. */
export const OTHER_STREAM = 'other';

/** One scrape's view of the per-stream data, already capped. */
interface Snapshot {
  listeners: Map<string, number>; // `${stream}\u0000${protocol}` → count
  ingest: Array<{ stream: string; live: number; kbps: number }>;
  http: HttpCounts;
}

/**
 * The streams that keep their own label: the `max` with the most listeners (ties by id), then live
 * streams without listeners in id order, up to `max` in all.
 */
export function keptStreams(listeners: Iterable<StreamListeners>, ingest: Iterable<StreamIngest>, max: number): Set<string> {
  const totals = new Map<string, number>();
  for (const l of listeners) totals.set(l.stream, (totals.get(l.stream) ?? 0) + l.count);
  const ranked = [...totals].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
  const kept = new Set<string>();
  for (const [id] of ranked) {
    if (kept.size >= max) return kept;
    kept.add(id);
  }
  const rest = [...ingest].map((i) => i.stream).filter((id) => !kept.has(id)).sort();
  for (const id of rest) {
    if (kept.size >= max) break;
    kept.add(id);
  }
  return kept;
}

/** The per-stream data of one scrape, capped at `max` streams (see the module comment). */
function capped(sources: MetricsSources, max: number, http: HttpCounts): Snapshot {
  const listeners = [...sources.listeners()];
  const ingest = [...sources.ingest()];
  const kept = keptStreams(listeners, ingest, max);
  const byKey = new Map<string, number>();
  for (const l of listeners) {
    const key = `${kept.has(l.stream) ? l.stream : OTHER_STREAM}\u0000${l.protocol}`;
    byKey.set(key, (byKey.get(key) ?? 0) + l.count);
  }
  const out: Snapshot['ingest'] = [];
  let otherLive = 0;
  let otherKbps = 0;
  let others = 0;
  for (const i of ingest) {
    if (kept.has(i.stream)) out.push({ stream: i.stream, live: i.live ? 1 : 0, kbps: i.kbps });
    else {
      others++;
      otherLive += i.live ? 1 : 0;
      otherKbps += i.kbps;
    }
  }
  if (others > 0) out.push({ stream: OTHER_STREAM, live: otherLive, kbps: otherKbps });
  return { listeners: byKey, ingest: out, http };
}

/** Settings of `NodeMetrics`. */
export interface NodeMetricsOptions {
  sources: MetricsSources;
  /** Streams with their own `stream` label (≥ 1); the rest are summed as `stream="other"`. */
  maxStreams: number;
  /** Also expose prom-client's default process and Node.js metrics (default true). */
  defaults?: boolean;
}

/** The node's metric registry (see the module comment). One per server. */
export class NodeMetrics {
  readonly registry = new client.Registry();
  private snap: Snapshot | null = null;
  /** The scrape in progress (concurrent scrapes share it). */
  private running: Promise<string> | null = null;

  constructor(private readonly o: NodeMetricsOptions) {
    if (o.defaults !== false) {
      client.collectDefaultMetrics({ register: this.registry });
      // Gauges named like counters, which Prometheus's linter (`promtool check metrics`) refuses; the
      // same counts by type stay (`nodejs_active_handles`, `nodejs_active_requests`, `nodejs_active_resources`).
      for (const name of LINT_REFUSED_DEFAULTS) this.registry.removeSingleMetric(name);
    }
    registerNodeMetrics(this.registry, () => this.snap, o.sources);
  }

  /** The Content-Type of `scrape()`'s text (`text/plain; version=0.0.4; charset=utf-8`). */
  get contentType(): string {
    return this.registry.contentType;
  }

  /**
   * One scrape: reads every source once and renders the text exposition format.
   * @throws Error when a source fails (the caller answers 500)
   */
  scrape(): Promise<string> {
    this.running ??= this.render().finally(() => {
      this.running = null;
      this.snap = null;
    });
    return this.running;
  }

  private async render(): Promise<string> {
    const http = await this.o.sources.http();
    this.snap = capped(this.o.sources, Math.max(1, this.o.maxStreams), http);
    return this.registry.metrics();
  }
}

/** Sets `m` to exactly the labelled values of `entries` (series no longer present disappear). */
function setAll<L extends string>(m: client.Gauge<L> | client.Counter<L>, entries: Iterable<[Partial<Record<L, string | number>>, number]>): void {
  m.reset();
  for (const [labels, v] of entries) {
    if (m instanceof client.Gauge) m.set(labels, v);
    else m.inc(labels, Math.max(0, v));
  }
}

/** Registers every `skylark_*` metric of docs/metrics.md on `registry`, each read from `snap()` or `s` when scraped. */
function registerNodeMetrics(registry: client.Registry, snap: () => Snapshot | null, s: MetricsSources): void {
  const registers = [registry];
  new client.Gauge({
    name: 'skylark_listeners',
    help: 'Listeners now, by stream (the busiest streams; the rest summed as stream="other") and protocol.',
    labelNames: ['stream', 'protocol'] as const,
    registers,
    collect() {
      const entries: Array<[{ stream: string; protocol: string }, number]> = [];
      for (const [key, n] of snap()?.listeners ?? []) {
        const [stream, protocol] = key.split('\u0000') as [string, string];
        entries.push([{ stream, protocol }, n]);
      }
      setAll(this, entries);
    },
  });
  new client.Counter({
    name: 'skylark_bytes_sent_total',
    help: 'Body bytes sent to listeners, by protocol.',
    labelNames: ['protocol'] as const,
    registers,
    collect() {
      setAll(this, Object.entries(snap()?.http.bytes ?? {}).map(([protocol, n]) => [{ protocol }, n ?? 0]));
    },
  });
  new client.Gauge({
    name: 'skylark_ingest_live',
    help: 'Whether the stream has a live publisher (1/0); for stream="other", the number of other streams live.',
    labelNames: ['stream'] as const,
    registers,
    collect() {
      setAll(this, (snap()?.ingest ?? []).map((i) => [{ stream: i.stream }, i.live]));
    },
  });
  new client.Gauge({
    name: 'skylark_ingest_bitrate_kbps',
    help: 'Ingest audio bitrate over the last 5 seconds (kbps); for stream="other", the sum of the other streams.',
    labelNames: ['stream'] as const,
    registers,
    collect() {
      setAll(this, (snap()?.ingest ?? []).map((i) => [{ stream: i.stream }, Math.round(i.kbps * 10) / 10]));
    },
  });
  new client.Counter({
    name: 'skylark_http_requests_total',
    help: 'HTTP requests answered, by route class and status code.',
    labelNames: ['route', 'status'] as const,
    registers,
    collect() {
      setAll(this, (snap()?.http.requests ?? []).map((r) => [{ route: r.route, status: r.status }, r.count]));
    },
  });
  registerCounts(registry, s);
}

/** The node-wide counts and gauges read straight from their sources. */
function registerCounts(registry: client.Registry, s: MetricsSources): void {
  const registers = [registry];
  const gauge = (name: string, help: string, read: () => number) =>
    new client.Gauge({
      name,
      help,
      registers,
      collect() {
        this.set(read());
      },
    });
  gauge('skylark_hls_held_reloads', 'LL-HLS requests held now (blocking playlist reloads and part waits), node-wide.', () => s.heldReloads());
  gauge('skylark_webhook_queue_depth', 'Webhook deliveries pending (due now or waiting for a retry).', () => s.webhookQueueDepth());
  gauge('skylark_ffmpeg_processes', 'FFmpeg processes running now (encoders, fallback players, remuxes, analyses).', () => s.ffmpegProcesses());
  new client.Counter({
    name: 'skylark_refusals_total',
    help: 'Requests and connections refused or cut by a limit of the node (docs/behaviour.md §13), by limit.',
    labelNames: ['limit'] as const,
    registers,
    collect() {
      setAll(this, Object.entries(s.refusals()).map(([limit, n]) => [{ limit }, n]));
    },
  });
  new client.Counter({
    name: 'skylark_webhook_deliveries_total',
    help: 'Webhook delivery attempts committed, by outcome (delivered, retrying, undelivered).',
    labelNames: ['outcome'] as const,
    registers,
    collect() {
      setAll(this, Object.entries(s.webhookDeliveries()).map(([outcome, n]) => [{ outcome }, n]));
    },
  });
  new client.Counter({
    name: 'skylark_downloads_counted_total',
    help: 'Podcast downloads counted (IAB: a client reaching one minute of audio), since the process started.',
    registers,
    collect() {
      this.reset();
      const n = s.downloadsCounted();
      if (n > 0) this.inc(n);
    },
  });
}
