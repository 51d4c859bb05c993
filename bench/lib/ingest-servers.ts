/**
 * Servers and load for the ingest bench: nginx-rtmp from bench/peers/nginx-rtmp.conf.tmpl,
 * Skylark streams through the API, and the replayer child process (bench/lib/ingest-replay-child.ts).
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { createInterface } from 'node:readline';
import type { ChildProcess } from 'node:child_process';
import { freePort, have, sleep, spawnWithFds, stop } from './proc.js';
import { get } from './http-check.js';
import type { PublishTarget } from './rtmp-replayer.js';
import type { PoolStats } from './rtmp-replayer.js';
import type { IcecastTarget } from './icecast-replayer.js';

const root = path.resolve(import.meta.dirname, '..', '..');
const NGINX_RTMP_MODULE = '/usr/lib/nginx/modules/ngx_rtmp_module.so';

/** Why nginx-rtmp cannot run here (with the apt-get line), or null. */
export function nginxRtmpMissing(): string | null {
  if (!have('nginx') && !existsSync('/usr/sbin/nginx')) return 'nginx is not installed: apt-get install -y nginx libnginx-mod-rtmp';
  if (!existsSync(NGINX_RTMP_MODULE)) return `${NGINX_RTMP_MODULE} is missing: apt-get install -y libnginx-mod-rtmp`;
  return null;
}

function tcpOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

/** nginx + nginx-rtmp, 1 worker, `hls on; hls_fragment 2s` (application `live`, HLS under `<dir>/hls`). */
export async function startNginxRtmp(dir: string) {
  for (const d of ['hls', 'hls6', 'static']) mkdirSync(path.join(dir, d), { recursive: true });
  writeFileSync(path.join(dir, 'hls', 'ready.txt'), 'ok\n');
  const rtmpPort = await freePort();
  const httpPort = await freePort();
  const conf = readFileSync(path.join(import.meta.dirname, '..', 'peers', 'nginx-rtmp.conf.tmpl'), 'utf8')
    .replaceAll('@WORKERS@', '1')
    .replaceAll('@DIR@', dir)
    .replaceAll('@RTMP_PORT@', String(rtmpPort))
    .replaceAll('@HTTP_PORT@', String(httpPort));
  const leftover = /@[A-Z_]+@/.exec(conf);
  if (leftover) throw new Error(`nginx-rtmp template placeholder ${leftover[0]} is not filled in`);
  writeFileSync(path.join(dir, 'nginx.conf'), conf);
  const bin = have('nginx') ? 'nginx' : '/usr/sbin/nginx';
  const child = spawnWithFds([bin, '-p', `${dir}/`, '-e', path.join(dir, 'error.log'), '-c', path.join(dir, 'nginx.conf')]);
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  const base = `http://127.0.0.1:${httpPort}`;
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (child.exitCode !== null) {
      const errLog = existsSync(path.join(dir, 'error.log')) ? readFileSync(path.join(dir, 'error.log'), 'utf8') : '';
      throw new Error(`nginx-rtmp exited with ${child.exitCode}: ${(stderr + errLog).trim().slice(0, 800)}`);
    }
    try {
      if ((await get(`${base}/hls/ready.txt`, 1000)).status === 200 && (await tcpOpen(rtmpPort))) break;
    } catch {
      /* not up yet */
    }
    if (Date.now() > deadline) {
      await stop(child, 'SIGKILL');
      throw new Error('nginx-rtmp did not answer in 10 s');
    }
    await sleep(100);
  }
  await sleep(200); // the worker forks after the master binds
  return { child, rtmpPort, base, hlsDir: path.join(dir, 'hls') };
}

/** A Skylark stream as the API returns it. */
export interface SkylarkStream {
  id: string;
  rtmpUrl: string;
  streamKey: string;
  hlsUrl: string;
  /** `http://host:port/live/<id>`: where an Icecast source sends. */
  icecastUrl: string;
}

/**
 * Creates a stream with `POST /v2/streams` (AAC, medium, the given reconnect window, `latencyMode`
 * low by default: the benches measure LL-HLS first parts). @throws Error on a non-201
 */
export async function createStream(http: string, secretKey: string, title: string, reconnectWindow = 5, latencyMode: 'standard' | 'low' = 'low'): Promise<SkylarkStream> {
  for (let attempt = 0; ; attempt++) {
    const res = await fetch(`${http}/v2/streams`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${secretKey}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ title, codec: 'aac', quality: 'medium', reconnectWindow, latencyMode }),
      signal: AbortSignal.timeout(10_000),
    });
    const body = (await res.json()) as Partial<SkylarkStream>;
    if (res.status === 429 && attempt < 3) {
      await sleep(Number(res.headers.get('retry-after') ?? 5) * 1000);
      continue;
    }
    if (res.status !== 201 || !body.id || !body.rtmpUrl || !body.streamKey || !body.hlsUrl) {
      throw new Error(`POST /v2/streams answered ${res.status}: ${JSON.stringify(body).slice(0, 400)}`);
    }
    return body as SkylarkStream;
  }
}

/** The replayer target of a Skylark stream: app `live/<id>`, name = the key (rtmpUrl is rtmp://host:port/live/<id>). */
export function skylarkTarget(s: SkylarkStream): PublishTarget {
  const u = new URL(s.rtmpUrl);
  return { host: u.hostname, port: Number(u.port || 1935), app: u.pathname.replace(/^\//, ''), name: s.streamKey, tcUrl: s.rtmpUrl };
}

/** The Icecast source target of a Skylark stream (icecastUrl is http://host:port/live/<id>). */
export function skylarkIcecastTarget(s: SkylarkStream): IcecastTarget {
  const u = new URL(s.icecastUrl);
  return { host: u.hostname, port: Number(u.port || 80), streamId: s.id, key: s.streamKey };
}

/**
 * The replayer child process: publishes to every target over RTMP (`PublishTarget`s) or, with
 * `protocol` 'icecast', as Icecast sources (`IcecastTarget`s); `ready` when all started (or failed).
 */
export async function startReplayer(workDir: string, label: string, flv: string, targets: PublishTarget[] | IcecastTarget[], tickMs: number, protocol: 'rtmp' | 'icecast' = 'rtmp') {
  const cfgFile = path.join(workDir, `replay-${label}.json`);
  writeFileSync(cfgFile, JSON.stringify({ flv, protocol, tickMs, concurrency: 32, targets }));
  const child: ChildProcess = spawnWithFds([process.execPath, '--import', 'tsx', path.join(root, 'bench', 'lib', 'ingest-replay-child.ts'), cfgFile], { cwd: root, fds: 4096 });
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  const lines = createInterface({ input: child.stdout! });
  const waiting: Array<(o: Record<string, unknown>) => void> = [];
  lines.on('line', (l) => {
    let o: Record<string, unknown>;
    try {
      o = JSON.parse(l) as Record<string, unknown>;
    } catch {
      return;
    }
    waiting.shift()?.(o);
  });
  const next = (timeoutMs: number) =>
    new Promise<Record<string, unknown>>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`replayer: no answer in ${timeoutMs} ms; stderr: ${stderr.trim().slice(0, 400)}`)), timeoutMs);
      waiting.push((o) => {
        clearTimeout(timer);
        resolve(o);
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`replayer exited with ${code}: ${stderr.trim().slice(0, 600)}`));
      });
    });
  const ready = (await next(60_000)) as { ev: 'ready'; ok: number; failedCount: number; failed: Array<{ index: number; reason: string }>; publishMs: number[] };
  return {
    child,
    pid: child.pid!,
    ready,
    /** The pool's counters (SIGUSR2 → one stats line). */
    async stats(): Promise<PoolStats> {
      const p = next(5000);
      child.kill('SIGUSR2');
      return (await p) as unknown as PoolStats;
    },
    stop: () => stop(child, 'SIGTERM', 3000),
  };
}
