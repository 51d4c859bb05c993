/**
 * Caching nginx edges in front of a Skylark origin (docs/behaviour.md §12), for test/integration/delivery/edges.test.ts
 * and the edges rows of bench/players.bench.ts: each edge runs Debian's nginx, in the foreground,
 * on the config that `skylark edge-config` prints (the CLI itself, from dist/), with its
 * `--access-log` on so that the origin fetches can be counted.
 *
 * Counting origin fetches: an access log line whose `$upstream_addr` is not `-` is a request the
 * edge passed to the origin (a retry would list more than one address: each counts). Lines are
 * keyed like the edge's cache: media objects by path, blocking reloads by path + `_HLS_msn` +
 * `_HLS_part`; anything else (non-blocking playlists, the multivariant playlist, the API) is
 * "passed through".
 */
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';

const root = path.resolve(import.meta.dirname, '..', '..');

export interface EdgeOptions {
  /** The origin's base URL (`http://host:port`). */
  origin: string;
  /** The edge's listen address (a loopback alias such as 127.0.0.2). */
  host: string;
  /** The edge's port (default: a free one on `host`). */
  port?: number;
  /** The origin's edge log receiver, `host:port` (`--log-to`). */
  logTo?: string;
  /** The origin's data dir (`--data-dir`): where edge-config reads the origin's edge-log secret from (with `logTo`). */
  originDataDir?: string;
  /** `--trust-forwarded-from` CIDRs: whose X-Forwarded-For the edge believes. */
  trustForwardedFrom?: string[];
  /** A directory of its own (cache, temp files, logs, the config). */
  dir: string;
}

/** Origin fetches an edge made, by what its cache keys them on. */
export interface OriginFetches {
  /** Media objects (segments, parts, init sections) by path. */
  objects: Map<string, number>;
  /** Blocking reloads by `path?_HLS_msn=M&_HLS_part=P`. */
  blocking: Map<string, number>;
  /** Requests passed through (non-blocking playlists, the multivariant playlist, anything else). */
  passed: number;
  /** Every origin fetch. */
  total: number;
  /**
   * Attempts on a kept-alive connection that the origin had closed, sent again by nginx on a new
   * one (`$upstream_status` 502 followed by another attempt in the same line): the origin answered
   * none of them, so they are not fetches.
   */
  retried: number;
  /** Requests the edge answered (access log lines). */
  requests: number;
}

export interface Edge {
  /** `http://host:port` */
  url: string;
  host: string;
  port: number;
  dir: string;
  /** The nginx master's pid (its workers are its children). */
  pid: number;
  /** The generated config text. */
  config: string;
  /** Origin fetches between `from` and `to` (epoch ms; default: all). */
  originFetches(from?: number, to?: number): OriginFetches;
  /** The access log lines of requests with these cache keys (as `OriginFetches` keys them): for a failure message. */
  accessLines(keys: string[]): string[];
  /** Stops nginx (SIGTERM, then SIGKILL after 5 s). */
  stop(): Promise<void>;
}

/** A free TCP port on `host`. */
function freePortOn(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, host, () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
  });
}

/** Whether nginx can be run here (on PATH or in /usr/sbin). */
export function nginxBinary(): string | null {
  for (const p of ['/usr/sbin/nginx', '/usr/bin/nginx', '/usr/local/sbin/nginx']) if (existsSync(p)) return p;
  return null;
}

/**
 * Starts one edge: `skylark edge-config` → `<dir>/nginx.conf` → `nginx -c … -g 'daemon off;'`.
 * Resolves once it accepts connections.
 * @throws Error when nginx is missing, the config is refused, or it does not come up within 10 s
 */
export async function startEdge(o: EdgeOptions): Promise<Edge> {
  const nginx = nginxBinary();
  if (!nginx) throw new Error('nginx is not installed (apt-get install -y nginx)');
  mkdirSync(o.dir, { recursive: true });
  chmodSync(o.dir, 0o755); // started as root, nginx's workers (nobody) must reach the cache dir
  const port = o.port ?? (await freePortOn(o.host));
  const accessLog = path.join(o.dir, 'access.log');
  const args = ['edge-config', '--origin', o.origin, '--listen', `${o.host}:${port}`, '--cache-dir', o.dir, '--access-log', accessLog];
  if (o.logTo) args.push('--log-to', o.logTo);
  if (o.originDataDir) args.push('--data-dir', o.originDataDir);
  for (const c of o.trustForwardedFrom ?? []) args.push('--trust-forwarded-from', c);
  const { stdout: config } = await promisify(execFile)(process.execPath, [path.join(root, 'bin', 'skylark.js'), ...args]);
  const file = path.join(o.dir, 'nginx.conf');
  writeFileSync(file, config);
  const child: ChildProcess = spawn(nginx, ['-c', file, '-g', 'daemon off;'], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`nginx exited: ${stderr.trim() || readText(path.join(o.dir, 'error.log'))}`);
    if (await accepts(o.host, port)) break;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`nginx did not listen on ${o.host}:${port} within 10 s: ${stderr.trim()}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    url: `http://${o.host}:${port}`,
    host: o.host,
    port,
    dir: o.dir,
    pid: child.pid!,
    config,
    originFetches: (from = 0, to = Infinity) => countFetches(readText(accessLog), from, to),
    accessLines: (keys) => {
      const want = new Set(keys);
      return readText(accessLog)
        .split('\n')
        .filter((l) => {
          const m = LINE.exec(l);
          return m !== null && want.has(cacheKey(m[2]!) ?? '');
        });
    },
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
        child.kill('SIGTERM');
        await exited;
        clearTimeout(timer);
      }
    },
  };
}

const readText = (f: string) => {
  try {
    return readFileSync(f, 'utf8');
  } catch {
    return '';
  }
};

function accepts(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(port, host);
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

/**
 * A line of the `skylark_edge_file` access log format: `$msec $remote_addr "$request" $status
 * $body_bytes_sent cache=$upstream_cache_status rt=$request_time ustatus=$upstream_status
 * urt=$upstream_response_time upstream=$upstream_addr`.
 */
const LINE = /^(\d+\.\d+) \S+ "(?:GET|HEAD) (\S+) [^"]*" \d+ \d+ cache=\S* (?:\S+ )*upstream=(.*)$/;

/** The `ustatus=` field of such a line: `$upstream_status`, one status per attempt. */
const STATUS = / ustatus=(.*?) urt=/;

/** A request target as the edge's cache keys it: an object's path, a blocking reload's path + `_HLS_msn` + `_HLS_part`; null otherwise. */
function cacheKey(target: string): string | null {
  const u = new URL(target, 'http://edge');
  if (/^\/hls\/[^/]+\/[^/]+\/[^/]+\.(?:m4s|ts|mp4)$/.test(u.pathname)) return u.pathname;
  if (u.pathname.endsWith('/index.m3u8') && u.searchParams.has('_HLS_msn')) return `${u.pathname}?_HLS_msn=${u.searchParams.get('_HLS_msn')}&_HLS_part=${u.searchParams.get('_HLS_part') ?? ''}`;
  return null;
}

/** Counts the origin fetches in a `skylark_edge_file` access log between `from` and `to` (epoch ms). */
export function countFetches(log: string, from: number, to: number): OriginFetches {
  const out: OriginFetches = { objects: new Map(), blocking: new Map(), passed: 0, total: 0, retried: 0, requests: 0 };
  for (const l of log.split('\n')) {
    const m = LINE.exec(l);
    if (!m) continue;
    const at = Number(m[1]) * 1000;
    if (at < from || at > to) continue;
    out.requests++;
    if (m[3] === '-') continue;
    // One address and one status per attempt (", " between attempts, " : " between upstream groups).
    const statuses = (STATUS.exec(l)?.[1] ?? '').split(/[,:] /);
    const attempts = m[3]!.split(/[,:] /).length;
    let retried = 0;
    for (let i = 0; i < attempts - 1; i++) if (statuses[i] === '502') retried++;
    out.retried += retried;
    const n = attempts - retried;
    out.total += n;
    const key = cacheKey(m[2]!);
    const map = key === null ? null : key.includes('?') ? out.blocking : out.objects;
    if (map) map.set(key!, (map.get(key!) ?? 0) + n);
    else out.passed += n;
  }
  return out;
}
