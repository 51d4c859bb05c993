/**
 * Process helpers for the load benches: spawning children with a raised fd limit and a deadline,
 * stopping them, CPU time from /proc (as in docs/bench/method.md "The peers measured alone":
 * utime+stime of every thread of the process and of its child processes), free loopback ports, and
 * which tools are installed.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import net from 'node:net';

/** Clock ticks per second of /proc/PID/stat times. */
export const CLK_TCK = (() => {
  const r = spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' });
  const n = Number(r.stdout?.trim());
  return Number.isFinite(n) && n > 0 ? n : 100;
})();

/** Every child this module started, killed when the bench process exits however it exits. */
const live = new Set<ChildProcess>();
const killAll = () => {
  for (const c of live) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
};
process.once('exit', killAll);
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.once(sig, () => {
    killAll();
    process.exit(128 + ({ SIGINT: 2, SIGTERM: 15, SIGHUP: 1 } as const)[sig]);
  });
}

/** `'a b'` for the shell, quoted. */
export const shq = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/**
 * Spawns `argv` through `bash -c 'ulimit -n …; exec …'` so the child gets a raised fd limit and
 * keeps the pid (exec). The child is tracked and killed when this process exits.
 */
export function spawnWithFds(argv: string[], opts: { env?: NodeJS.ProcessEnv; cwd?: string; fds?: number } = {}): ChildProcess {
  const fds = opts.fds ?? 20000;
  const script = `ulimit -n ${fds} 2>/dev/null || ulimit -n "$(ulimit -Hn)"; exec ${argv.map(shq).join(' ')}`;
  const child = spawn('bash', ['-c', script], { env: opts.env ?? process.env, cwd: opts.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  live.add(child);
  child.once('exit', () => live.delete(child));
  return child;
}

/** Collected output of a finished (or timed-out) child. */
export interface Finished {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
  /** CPU % (of one core) the child used over its life, from this process's cutime/cstime. */
  cpuPercent: number | null;
}

/** Runs `argv` to completion (fd limit raised), killing it after `timeoutMs`. */
export function runToEnd(argv: string[], timeoutMs: number, opts: { env?: NodeJS.ProcessEnv; fds?: number } = {}): Promise<Finished> {
  return new Promise((resolve) => {
    const before = childrenTicks();
    const t0 = performance.now();
    const child = spawnWithFds(argv, opts);
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    child.stdout!.on('data', (d) => (stdout += d));
    child.stderr!.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, timeoutMs);
    child.once('error', (e) => {
      stderr += String(e);
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      const secs = (performance.now() - t0) / 1000;
      const after = childrenTicks();
      const cpuPercent = before !== null && after !== null && secs > 0 ? ((after - before) / CLK_TCK / secs) * 100 : null;
      resolve({ code, signal, stdout, stderr, timedOut, cpuPercent });
    });
  });
}

/** Stops a child: `signal`, then SIGKILL after `graceMs`. Resolves when it has exited. */
export function stop(child: ChildProcess, signal: NodeJS.Signals = 'SIGTERM', graceMs = 5000): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill(signal);
  });
}

/** Fields of /proc/PID/stat after the `(comm)` field, 0-based from field 3 (state). */
function statFields(pid: number): string[] | null {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return s.slice(s.lastIndexOf(')') + 2).split(' ');
  } catch {
    return null;
  }
}

/** utime+stime (ticks) of a process, all its threads. */
export function processTicks(pid: number): number | null {
  const f = statFields(pid);
  if (!f) return null;
  return Number(f[11]) + Number(f[12]); // fields 14 and 15 of proc(5)
}

/**
 * Run time (ns) of each live thread of a process, by thread id: the first field of
 * /proc/<pid>/task/<tid>/schedstat, which the scheduler counts exactly (utime and stime are
 * sampled at the clock tick). Empty when the process is gone.
 */
export function threadRunNs(pid: number): Map<string, number> {
  const out = new Map<string, number>();
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const t of tids) {
    try {
      out.set(t, Number(readFileSync(`/proc/${pid}/task/${t}/schedstat`, 'utf8').split(' ')[0]));
    } catch {
      // The thread ended between the listing and the read.
    }
  }
  return out;
}

/** Run time (ns) the threads of `after` had since `before` (a thread new since counts whole; one that ended since is lost). */
export function runNsSince(before: Map<string, number>, after: Map<string, number>): number {
  let ns = 0;
  for (const [t, v] of after) ns += v - (before.get(t) ?? 0);
  return ns;
}

/** Reaped children's CPU (cutime+cstime, ticks) of this process. */
function childrenTicks(): number | null {
  const f = statFields(process.pid);
  if (!f) return null;
  return Number(f[13]) + Number(f[14]); // fields 16 and 17
}

/** Child pids of `pid` (nginx workers of the master). */
export function childPids(pid: number): number[] {
  try {
    const out: number[] = [];
    for (const t of readdirSync(`/proc/${pid}/task`)) {
      const s = readFileSync(`/proc/${pid}/task/${t}/children`, 'utf8').trim();
      if (s) out.push(...s.split(/\s+/).map(Number));
    }
    return out;
  } catch {
    // No /proc/…/children: scan /proc for our children.
    const out: number[] = [];
    for (const d of readdirSync('/proc')) {
      if (!/^\d+$/.test(d)) continue;
      const f = statFields(Number(d));
      if (f && Number(f[1]) === pid) out.push(Number(d));
    }
    return out;
  }
}

/** CPU ticks of a process tree (the process and its direct children, e.g. nginx master + workers). */
export function treeTicks(pid: number): number {
  let sum = processTicks(pid) ?? 0;
  for (const c of childPids(pid)) sum += processTicks(c) ?? 0;
  return sum;
}

/** Busy and total jiffies of the whole box (/proc/stat `cpu` line). */
export function boxTicks(): { busy: number; total: number } {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0]!;
  const v = line.trim().split(/\s+/).slice(1).map(Number);
  const idle = (v[3] ?? 0) + (v[4] ?? 0); // idle + iowait
  const total = v.slice(0, 8).reduce((a, b) => a + b, 0); // guest time is already in user
  return { busy: total - idle, total };
}

/** A CPU meter over a window: server tree CPU % (of one core) and whole-box busy % (of all cores × 100). */
export function cpuMeter(pid: number) {
  const t0 = performance.now();
  const s0 = treeTicks(pid);
  const b0 = boxTicks();
  return () => {
    const secs = (performance.now() - t0) / 1000;
    const s1 = treeTicks(pid);
    const b1 = boxTicks();
    const cores = (b1.total - b0.total) / CLK_TCK / secs; // ≈ nproc
    return {
      serverPercent: ((s1 - s0) / CLK_TCK / secs) * 100,
      boxPercent: b1.total > b0.total ? ((b1.busy - b0.busy) / (b1.total - b0.total)) * 100 * Math.round(cores) : NaN,
    };
  };
}

/** A free TCP port on 127.0.0.1 (bound then released: a tiny race, fine for a bench). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
  });
}

/** Whether `cmd` runs (`cmd args…` exits at all, whatever its status). */
export function have(cmd: string): boolean {
  const r = spawnSync('bash', ['-c', `command -v ${shq(cmd)}`], { encoding: 'utf8' });
  return r.status === 0 && r.stdout.trim() !== '';
}

/** First line of a tool's version output (stdout or stderr), or null when it is missing. */
export function versionLine(argv: string[], match?: RegExp): string | null {
  if (!have(argv[0]!)) return null;
  const r = spawnSync(argv[0]!, argv.slice(1), { encoding: 'utf8', timeout: 5000 });
  const text = `${r.stdout ?? ''}\n${r.stderr ?? ''}`;
  const lines = text.split('\n').map((l) => l.trim()).filter(Boolean);
  const line = match ? lines.find((l) => match.test(l)) : lines[0];
  return line ?? null;
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
