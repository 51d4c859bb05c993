/**
 * Requests answered, by route class and status (docs/metrics.md `skylark_http_requests_total`): one
 * number per (class, status) in a flat array, added to where an answer is written — an array store,
 * no allocation, no string work on the HLS hot path. Each HTTP server (each HTTP thread) has its
 * own; `GET /metrics` reads them all at scrape time.
 */

/** The route classes, in index order (the `route` label). */
export const ROUTE_CLASSES = ['api', 'hls_playlist', 'hls_segment', 'hls_part', 'listen', 'dashboard', 'oauth', 'other'] as const;
export type RouteClass = (typeof ROUTE_CLASSES)[number];

/** Index of a class in ROUTE_CLASSES. */
export const RC = { api: 0, hls_playlist: 1, hls_segment: 2, hls_part: 3, listen: 4, dashboard: 5, oauth: 6, other: 7 } as const satisfies Record<RouteClass, number>;

const STATUS_MIN = 100;
const STATUS_SLOTS = 500; // 100–599

/**
 * The class of a request path or a route pattern (`/v2/…` → api, `/hls/…m3u8` → hls_playlist,
 * `/hls/…/<seq>.<part>.<ext>` → hls_part, other `/hls/…` → hls_segment, `/listen/…` and the
 * Icecast port's `/live/…` → listen, `/dashboard…` → dashboard, `/oauth/…` and
 * `/.well-known/…` → oauth, anything else → other).
 */
export function routeClassOf(path: string): number {
  if (path === '/v2' || path.startsWith('/v2/')) return RC.api;
  if (path.startsWith('/hls/')) {
    if (path.endsWith('.m3u8')) return RC.hls_playlist;
    return hlsObjectClass(path.slice(path.lastIndexOf('/') + 1));
  }
  if (path.startsWith('/listen/') || path.startsWith('/live/')) return RC.listen;
  if (path === '/dashboard' || path.startsWith('/dashboard/')) return RC.dashboard;
  if (path.startsWith('/oauth/') || path.startsWith('/.well-known/')) return RC.oauth;
  return RC.other;
}

/** An HLS object's file name: `<seq>.<part>.<ext>` → hls_part, else (segments, init sections) hls_segment. */
export function hlsObjectClass(file: string): number {
  const first = file.indexOf('.');
  return first > 0 && file.indexOf('.', first + 1) > 0 ? RC.hls_part : RC.hls_segment;
}

/** The status code at the start of a status line (`'200 OK'` or its bytes); 0 when it does not start with three digits. */
export function statusOf(line: string | Uint8Array): number {
  if (typeof line === 'string') {
    const n = Number(line.slice(0, 3));
    return Number.isInteger(n) ? n : 0;
  }
  const a = line[0]! - 48;
  const b = line[1]! - 48;
  const c = line[2]! - 48;
  return a >= 0 && a <= 9 && b >= 0 && b <= 9 && c >= 0 && c <= 9 ? a * 100 + b * 10 + c : 0;
}

/** Request counts of one HTTP server by (route class, status). */
export class HttpTally {
  /** Index `class × 500 + (status − 100)`. */
  readonly counts = new Float64Array(ROUTE_CLASSES.length * STATUS_SLOTS);
  /** Body bytes written, by route class (raw answers and progressive streams; JSON and form answers are not counted). */
  readonly bytes = new Float64Array(ROUTE_CLASSES.length);

  /** One answer of `status` (100–599; others are not counted) for route class `cls` (an RC value). */
  add(cls: number, status: number): void {
    const s = status - STATUS_MIN;
    if (s >= 0 && s < STATUS_SLOTS) this.counts[cls * STATUS_SLOTS + s]!++;
  }

  /** The non-zero counts as `[index, count]` pairs, then the non-zero byte counts at index `counts.length + class` (what an HTTP worker thread reports). */
  nonZero(): Array<[number, number]> {
    const out: Array<[number, number]> = [];
    const c = this.counts;
    for (let i = 0; i < c.length; i++) if (c[i] !== 0) out.push([i, c[i]!]);
    for (let i = 0; i < this.bytes.length; i++) if (this.bytes[i] !== 0) out.push([c.length + i, this.bytes[i]!]);
    return out;
  }
}

/** Sums of `nonZero()` pairs (from any number of servers): requests by (class, status) and bytes by class. */
export interface TallySums {
  requests: Array<{ route: RouteClass; status: number; count: number }>;
  bytes: Partial<Record<RouteClass, number>>;
}

/** Adds up `nonZero()` pairs of several servers (index by index). */
export function sumTallies(all: Iterable<Iterable<readonly [number, number]>>): TallySums {
  const sums = new Map<number, number>();
  for (const pairs of all) for (const [i, n] of pairs) sums.set(i, (sums.get(i) ?? 0) + n);
  const out: TallySums = { requests: [], bytes: {} };
  const countSlots = ROUTE_CLASSES.length * STATUS_SLOTS;
  for (const [i, n] of [...sums].sort((a, b) => a[0] - b[0])) {
    if (i >= countSlots) out.bytes[ROUTE_CLASSES[i - countSlots]!] = n;
    else out.requests.push({ route: ROUTE_CLASSES[Math.floor(i / STATUS_SLOTS)]!, status: (i % STATUS_SLOTS) + STATUS_MIN, count: n });
  }
  return out;
}
