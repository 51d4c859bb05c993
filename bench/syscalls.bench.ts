/**
 * Syscalls per HLS response (docs/benchmarks.md "Syscalls per response"): how many system calls
 * the server makes on a listener's connection to answer one request, counted by `strace` on the
 * Skylark process (the CLI, `node bin/skylark.js serve`, one HTTP thread) for each kind of object a
 * player fetches from a low-latency stream: the multivariant playlist, the media playlist, a
 * segment, an LL-HLS part, and a blocking playlist reload (`_HLS_msn`/`_HLS_part` of the next part:
 * the request waits until the part exists, then is answered).
 *
 * Method: a real stream (`latencyMode: "low"`, 0.5 s parts by default) published by FFmpeg; one
 * client keep-alive connection per object kind sends N requests one after another (each answer read
 * whole before the next request); `strace -f -yy` on the server writes every syscall with its
 * socket's addresses, and the lines whose socket is that connection (its client port) are counted
 * by name: sends (`sendto`, `sendmsg`, `writev`, `write`), receives (`recvfrom`, `read`), and the
 * rest (`epoll_ctl` on it, `setsockopt`, …). strace slows the process down; the counts do not
 * depend on speed, only on how the server writes. The rows are per response.
 *
 * Needs `strace` (Debian package `strace`) and FFmpeg; skipped with a note when strace is missing.
 * Settings: BENCH_SYSCALL_REQUESTS (40 per kind), BENCH_SYSCALL_KEEP_TRACE (1: keep the strace
 * output and print its path).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import net from 'node:net';
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';
import type { BenchRow } from './lib/report.js';
import { have, sleep, spawnWithFds, stop } from './lib/proc.js';
import { get } from './lib/http-check.js';
import { createAccount, startSkylark } from './http-segments.js';

const GROUP = 'Syscalls per HLS response (strace, one HTTP thread, keep-alive)';
const log = (msg: string) => process.stderr.write(`[syscalls] ${msg}\n`);
const REQUESTS = Number(process.env.BENCH_SYSCALL_REQUESTS || 40);

interface Counted {
  sends: number;
  receives: number;
  other: number;
  names: Map<string, number>;
}

/** A keep-alive HTTP/1.1 client on one socket: sends a GET and resolves when the whole answer is in. */
class OneConnection {
  private buf = Buffer.alloc(0);
  private waiting: ((r: { status: number; body: Buffer }) => void) | null = null;
  private constructor(readonly socket: net.Socket) {
    socket.on('data', (d) => {
      this.buf = Buffer.concat([this.buf, d]);
      this.tryFinish();
    });
  }
  static open(port: number): Promise<OneConnection> {
    return new Promise((resolve, reject) => {
      const s = net.connect(port, '127.0.0.1', () => resolve(new OneConnection(s)));
      s.once('error', reject);
    });
  }
  get localPort(): number {
    return this.socket.localPort!;
  }
  get(pathAndQuery: string): Promise<{ status: number; body: Buffer }> {
    return new Promise((resolve) => {
      this.waiting = resolve;
      this.socket.write(`GET ${pathAndQuery} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
    });
  }
  private tryFinish(): void {
    const end = this.buf.indexOf('\r\n\r\n');
    if (end < 0 || !this.waiting) return;
    const head = this.buf.subarray(0, end).toString('latin1');
    const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
    if (this.buf.length < end + 4 + length) return;
    const status = Number(head.slice(9, 12));
    const body = this.buf.subarray(end + 4, end + 4 + length);
    this.buf = this.buf.subarray(end + 4 + length);
    const w = this.waiting;
    this.waiting = null;
    w({ status, body: Buffer.from(body) });
  }
  close(): void {
    this.socket.destroy();
  }
}

/** Counts the syscalls of `trace` (strace -f -yy output) made on the connection whose client port is `clientPort`. */
function countFor(trace: string, serverPort: number, clientPort: number): Counted {
  const needle = `127.0.0.1:${serverPort}->127.0.0.1:${clientPort}]`;
  const c: Counted = { sends: 0, receives: 0, other: 0, names: new Map() };
  for (const line of trace.split('\n')) {
    if (!line.includes(needle)) continue;
    const name = /^(?:\[pid +\d+\] |\d+ +)?([a-z_0-9]+)\(/.exec(line)?.[1];
    if (!name || line.includes('<unfinished') || line.includes('resumed>')) continue;
    c.names.set(name, (c.names.get(name) ?? 0) + 1);
    if (/^(sendto|sendmsg|send|writev|write|sendfile)$/.test(name)) c.sends++;
    else if (/^(recvfrom|recvmsg|recv|read|readv)$/.test(name)) c.receives++;
    else c.other++;
  }
  return c;
}

/** Publishes a sine tone as AAC with FFmpeg until stopped. */
function publishTone(rtmpUrl: string): ChildProcess {
  return spawnWithFds(['ffmpeg', '-hide_banner', '-nostdin', '-loglevel', 'error', '-re', '-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=48000', '-c:a', 'aac', '-b:a', '128k', '-f', 'flv', rtmpUrl]);
}

interface Kind {
  name: string;
  /** The path (and query) of the i-th request, from the current media playlist. */
  next: (media: string, i: number) => string;
}

const lastPart = (media: string): string | null => {
  const parts = [...media.matchAll(/#EXT-X-PART:[^\n]*URI="([^"]+)"/g)].map((m) => m[1]!);
  return parts[parts.length - 1] ?? null;
};
const lastSegment = (media: string): string | null => media.split('\n').filter((l) => l && !l.startsWith('#')).pop() ?? null;
/** `_HLS_msn`/`_HLS_part` of the part after the last one listed. */
function nextPartDirective(media: string): string {
  const msn = Number(/#EXT-X-MEDIA-SEQUENCE:(\d+)/.exec(media)![1]) + media.split('\n').filter((l) => l.startsWith('#EXTINF')).length;
  const tail = media.slice(media.lastIndexOf('#EXTINF'));
  const partsAfter = (tail.match(/#EXT-X-PART:/g) ?? []).length;
  return `_HLS_msn=${msn}&_HLS_part=${partsAfter}`;
}

async function measureKind(pid: number, httpPort: number, base: string, mediaPath: string, kind: Kind): Promise<Counted & { ok: number }> {
  const conn = await OneConnection.open(httpPort);
  const clientPort = conn.localPort; // read before close: a destroyed socket forgets it
  const dir = mkdtempSync(path.join(tmpdir(), 'skylark-strace-'));
  const out = path.join(dir, 'trace');
  const strace = spawnWithFds(['strace', '-f', '-yy', '-qq', '-s', '0', '-e', 'trace=%network,%desc', '-o', out, '-p', String(pid)]);
  await sleep(1500); // attached to every thread
  let ok = 0;
  try {
    for (let i = 0; i < REQUESTS; i++) {
      const media = Buffer.from((await get(`${base}${mediaPath}`)).body).toString('utf8');
      const r = await conn.get(kind.next(media, i));
      if (r.status === 200 && r.body.length > 0) ok++;
    }
  } finally {
    await sleep(300);
    await stop(strace, 'SIGINT', 5000);
    conn.close();
  }
  const counted = countFor(readFileSync(out, 'utf8'), httpPort, clientPort);
  if (process.env.BENCH_SYSCALL_KEEP_TRACE) log(`trace kept: ${out} (client port ${clientPort})`);
  else rmSync(dir, { recursive: true, force: true });
  return { ...counted, ok };
}

export async function run(): Promise<BenchRow[]> {
  if (!have('strace') || !have('ffmpeg')) return [{ group: GROUP, name: 'skipped', value: 0, unit: '', note: 'needs strace and ffmpeg' }];
  const dataDir = mkdtempSync(path.join(tmpdir(), 'skylark-bench-syscalls-'));
  const sk = await startSkylark(path.join(dataDir, 'data'));
  let ff: ChildProcess | null = null;
  try {
    const key = await createAccount(path.join(dataDir, 'data'), sk.defaultSecretKey);
    const res = await fetch(`${sk.http}/v2/streams`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ title: 'Syscalls', codec: 'aac', quality: 'medium', latencyMode: 'low', reconnectWindow: 60 }),
    });
    const s = (await res.json()) as { id: string; rtmpUrl: string; streamKey: string; hlsUrl: string };
    ff = publishTone(`${s.rtmpUrl}/${s.streamKey}`);
    const httpPort = Number(new URL(sk.http).port);
    const hls = new URL(s.hlsUrl);
    let mediaPath = '';
    for (let i = 0; i < 80 && !mediaPath; i++) {
      await sleep(250);
      const mv = await get(s.hlsUrl).catch(() => null);
      const uri = mv?.status === 200 ? Buffer.from(mv.body).toString('utf8').split('\n').find((l) => l && !l.startsWith('#')) : undefined;
      if (uri) {
        const m = await get(new URL(uri, s.hlsUrl).toString());
        if (m.status === 200 && Buffer.from(m.body).toString('utf8').includes('#EXTINF')) mediaPath = new URL(uri, s.hlsUrl).pathname;
      }
    }
    if (!mediaPath) throw new Error('the stream never listed a segment');
    const dirOf = mediaPath.slice(0, mediaPath.lastIndexOf('/') + 1);
    const kinds: Kind[] = [
      { name: 'multivariant playlist', next: () => hls.pathname },
      { name: 'media playlist', next: () => mediaPath },
      { name: 'segment', next: (m) => dirOf + lastSegment(m)! },
      { name: 'LL-HLS part', next: (m) => dirOf + (lastPart(m) ?? lastSegment(m)!) },
      { name: 'blocking playlist reload', next: (m) => `${mediaPath}?${nextPartDirective(m)}` },
    ];
    const rows: BenchRow[] = [];
    for (const kind of kinds) {
      const c = await measureKind(sk.child.pid!, httpPort, sk.http, mediaPath, kind);
      const per = (n: number) => Math.round((n / Math.max(1, c.ok)) * 100) / 100;
      const names = [...c.names].sort((a, b) => b[1] - a[1]).map(([n, k]) => `${n} ${per(k)}`).join(', ');
      log(`${kind.name}: ${c.ok}/${REQUESTS} answered; per response: ${names}`);
      rows.push({ group: GROUP, name: `${kind.name}: sends`, value: per(c.sends), unit: 'per response', note: names });
      rows.push({ group: GROUP, name: `${kind.name}: all syscalls on the socket`, value: per(c.sends + c.receives + c.other), unit: 'per response' });
    }
    return rows;
  } finally {
    if (ff) await stop(ff, 'SIGKILL', 1000);
    await stop(sk.child, 'SIGTERM', 5000);
    rmSync(dataDir, { recursive: true, force: true });
  }
}
