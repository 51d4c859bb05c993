/**
 * Runs wrk (4.x) and parses its text output. wrk prints binary units (1 KB = 1024 B) for bytes
 * and us/ms/s/m/h for times; every value here is converted to plain units (B/s, ms).
 */
import { runToEnd } from './proc.js';

/** What one wrk run measured. */
export interface WrkResult {
  requests: number;
  durationS: number;
  bytesRead: number;
  reqPerSec: number;
  /** Transfer/sec converted to bytes per second (every byte read: headers included). */
  bytesPerSec: number;
  gbitPerSec: number;
  latencyAvgMs: number;
  p50Ms: number;
  p75Ms: number;
  p90Ms: number;
  p99Ms: number;
  socketErrors: { connect: number; read: number; write: number; timeout: number };
  non2xx3xx: number;
  /** CPU % (of one core) wrk itself used. */
  wrkCpuPercent: number | null;
  raw: string;
}

const BYTE_UNITS: Record<string, number> = { B: 1, KB: 1024, MB: 1024 ** 2, GB: 1024 ** 3, TB: 1024 ** 4, PB: 1024 ** 5 };
const TIME_MS: Record<string, number> = { us: 0.001, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** `"35.72KB"` → bytes. @throws Error on an unknown unit */
export function parseBytes(s: string): number {
  const m = /^([\d.]+)\s*([KMGTP]?B)$/i.exec(s.trim());
  if (!m) throw new Error(`wrk: cannot parse size '${s}'`);
  return Number(m[1]) * BYTE_UNITS[m[2]!.toUpperCase()]!;
}

/** `"1.50ms"` → milliseconds. @throws Error on an unknown unit */
export function parseTimeMs(s: string): number {
  const m = /^([\d.]+)\s*(us|ms|s|m|h)$/.exec(s.trim());
  if (!m) throw new Error(`wrk: cannot parse time '${s}'`);
  return Number(m[1]) * TIME_MS[m[2]!]!;
}

/** Parses wrk's report (run with `--latency`). @throws Error when a required line is missing */
export function parseWrk(out: string): Omit<WrkResult, 'wrkCpuPercent'> {
  const need = (re: RegExp, what: string) => {
    const m = re.exec(out);
    if (!m) throw new Error(`wrk output has no ${what} line:\n${out.trim().slice(0, 2000)}`);
    return m;
  };
  const total = need(/(\d+) requests in ([\d.]+\w+), ([\d.]+[KMGTP]?B) read/, "'N requests in'");
  const rps = need(/Requests\/sec:\s*([\d.]+)/, 'Requests/sec');
  const tps = need(/Transfer\/sec:\s*([\d.]+[KMGTP]?B)/, 'Transfer/sec');
  const lat = need(/^\s*Latency\s+([\d.]+\w+)/m, 'Latency');
  const pct = (p: number) => parseTimeMs(need(new RegExp(`^\\s*${p}%\\s+([\\d.]+\\w+)`, 'm'), `${p}% latency (was --latency given?)`)[1]!);
  const sock = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
  const non = /Non-2xx or 3xx responses: (\d+)/.exec(out);
  const bytesPerSec = parseBytes(tps[1]!);
  return {
    requests: Number(total[1]),
    durationS: parseTimeMs(total[2]!) / 1000,
    bytesRead: parseBytes(total[3]!),
    reqPerSec: Number(rps[1]),
    bytesPerSec,
    gbitPerSec: (bytesPerSec * 8) / 1e9,
    latencyAvgMs: parseTimeMs(lat[1]!),
    p50Ms: pct(50),
    p75Ms: pct(75),
    p90Ms: pct(90),
    p99Ms: pct(99),
    socketErrors: sock
      ? { connect: Number(sock[1]), read: Number(sock[2]), write: Number(sock[3]), timeout: Number(sock[4]) }
      : { connect: 0, read: 0, write: 0, timeout: 0 },
    non2xx3xx: non ? Number(non[1]) : 0,
    raw: out,
  };
}

/** `wrk -t<threads> -c<conns> -d<secs>s --latency <url>`, bounded to secs + 30 s. @throws Error when wrk fails */
export async function runWrk(url: string, o: { threads: number; connections: number; seconds: number; timeoutS?: number }): Promise<WrkResult> {
  const argv = ['wrk', `-t${o.threads}`, `-c${o.connections}`, `-d${o.seconds}s`, '--latency', ...(o.timeoutS ? ['--timeout', `${o.timeoutS}s`] : []), url];
  const r = await runToEnd(argv, (o.seconds + 30) * 1000);
  if (r.timedOut) throw new Error(`wrk did not finish in ${o.seconds + 30} s: ${argv.join(' ')}`);
  if (r.code !== 0) throw new Error(`wrk exited with ${r.code ?? r.signal}: ${r.stderr.trim() || r.stdout.trim()}`);
  return { ...parseWrk(r.stdout), wrkCpuPercent: r.cpuPercent };
}

/** Total socket errors of a run. */
export const socketErrorCount = (r: WrkResult) => r.socketErrors.connect + r.socketErrors.read + r.socketErrors.write + r.socketErrors.timeout;
