/** The printed report of `npm run bench`: machine and versions, then one Markdown table per group. */
import { readFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import type { BenchRow } from './report.js';
import { versionLine } from './proc.js';
import { buildGoals, GOALS_TITLE, type GoalRow } from './goals.js';

export interface MachineInfo {
  nproc: number;
  cpuModel: string;
  memGiB: number;
  kernel: string;
  loadAvg: string;
  versions: Record<string, string>;
}

/** nproc, CPU model, kernel, load and tool versions (`missing: apt-get install -y …` for absent tools). */
export function machineInfo(): MachineInfo {
  let cpuModel = os.cpus()[0]?.model ?? 'unknown';
  try {
    cpuModel = /model name\s*:\s*(.+)/.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1]?.trim() ?? cpuModel;
  } catch {
    /* keep os.cpus() */
  }
  let uws = 'unknown';
  try {
    // The build src/base/http/uws.ts loads on this host (docs/decisions.md "uWebSockets.js builds and Node.js lines").
    const root = path.resolve(import.meta.dirname, '..', '..');
    const pkgs = [['uWebSockets.js', ''], ['uws-pack', 'uws-pack '], ['@trufflesuite/uws-js-unofficial', '@trufflesuite/uws-js-unofficial ']] as const;
    const loadedBinary = readFileSync('/proc/self/maps', 'utf8').split('\n').find((l) => /\/uws_[^/]+\.node$/.test(l)) ?? '';
    const [pkg, label] = pkgs.find(([name]) => loadedBinary.includes(`/node_modules/${name}/`)) ?? pkgs[0];
    uws = label + (JSON.parse(readFileSync(path.join(root, 'node_modules', pkg, 'package.json'), 'utf8')) as { version: string }).version;
  } catch {
    /* not installed */
  }
  const deb = (pkg: string) => {
    const r = spawnSync('dpkg-query', ['-W', '-f=${Version}', pkg], { encoding: 'utf8' });
    return r.status === 0 && r.stdout.trim() ? ` (Debian ${r.stdout.trim()})` : '';
  };
  const tool = (argv: string[], pkg: string, match: RegExp, pick: RegExp) => {
    const line = versionLine(argv, match);
    if (line === null) return `missing: apt-get install -y ${pkg}`;
    const v = pick.exec(line)?.[1] ?? line;
    const d = deb(pkg);
    return d.includes(v) ? d.slice(2, -1) : `${v}${d}`;
  };
  return {
    nproc: os.availableParallelism(),
    cpuModel,
    memGiB: Math.round(os.totalmem() / 2 ** 30),
    kernel: `${os.type()} ${os.release()}`,
    loadAvg: os.loadavg().map((l) => l.toFixed(2)).join(' '),
    versions: {
      node: process.version,
      'uWebSockets.js': uws,
      nginx: tool(['nginx', '-v'], 'nginx', /nginx version/, /nginx\/(\S+)/),
      wrk: tool(['wrk', '-v'], 'wrk', /^wrk /, /^wrk (?:debian\/)?(\S+)/),
      ffmpeg: tool(['ffmpeg', '-version'], 'ffmpeg', /ffmpeg version/, /ffmpeg version (\S+)/),
    },
  };
}

/** A number for a table: thousands separated, 3 significant digits below 100. */
export function fmt(v: number): string {
  if (!Number.isFinite(v)) return '–';
  const a = Math.abs(v);
  if (a >= 1000) return Math.round(v).toLocaleString('en-US');
  if (a >= 100) return v.toFixed(0);
  if (a >= 10) return v.toFixed(1);
  if (a >= 1) return v.toFixed(2);
  if (a === 0) return '0';
  return v.toPrecision(3);
}

const ratio = (r: BenchRow) => (r.peer && Number.isFinite(r.value) && Number.isFinite(r.peer.value) && r.peer.value !== 0 ? `×${(r.value / r.peer.value).toFixed(2)}` : '');

function table(header: string[], body: string[][], rightAligned: number): string {
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => (i > 0 && i <= rightAligned ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join(' | ')} |`;
  return [line(header), `| ${widths.map((w) => '-'.repeat(w)).join(' | ')} |`, ...body.map(line)].join('\n');
}

const withUnit = (v: number, unit: string) => (Number.isFinite(v) ? `${fmt(v)} ${unit}` : '–');

/** The goals block (bench/lib/goals.ts) as a Markdown section: one line per measure, its peer beside it. */
export function formatGoals(goals: GoalRow[]): string {
  const body = goals.map((g) => [
    g.id,
    g.measure,
    g.measured ? withUnit(g.value, g.unit) : 'not measured',
    g.peer ? g.peer.name : '–',
    g.peer ? withUnit(g.peer.value, g.unit) : '–',
    Number.isFinite(g.ratio) ? `×${g.ratio.toFixed(2)}` : '–',
    g.goal,
    !g.measured ? 'not measured' : g.met === null ? '–' : g.met ? 'met' : 'NOT met',
    g.note,
  ]);
  const head = ['#', 'measure', 'Skylark', 'peer', 'peer value', 'Skylark/peer', 'goal', 'met?', 'note'];
  return [`## ${GOALS_TITLE}`, '', table(head, body, 0)].join('\n');
}

/** The whole report as text (Markdown tables): the goals block first, then one table per group. */
export function formatReport(rows: BenchRow[], failures: Array<{ part: string; error: string }>, m: MachineInfo, started: Date, goals: GoalRow[] = buildGoals(rows, failures)): string {
  const out: string[] = [];
  out.push(`# Skylark bench, ${started.toISOString()}`);
  out.push('');
  out.push(`Machine: ${m.nproc} CPU (${m.cpuModel}), ${m.memGiB} GiB, ${m.kernel}, load average at start ${m.loadAvg}`);
  out.push(`Versions: ${Object.entries(m.versions).map(([k, v]) => `${k} ${v}`).join('; ')}`);
  if (goals.length) out.push('', formatGoals(goals));
  // Groups in the order their rows came, except that a group with a `headline` row comes first.
  const groups = new Map<string, BenchRow[]>();
  for (const r of [...rows.filter((x) => x.headline), ...rows.filter((x) => !x.headline)]) groups.set(r.group, [...(groups.get(r.group) ?? []), r]);
  for (const [group, rs] of groups) {
    out.push('');
    out.push(`## ${group}`);
    out.push('');
    const hasPeer = rs.some((r) => r.peer);
    const peerName = [...new Set(rs.filter((r) => r.peer).map((r) => r.peer!.name))].join('/');
    if (hasPeer) {
      const header = ['measure', 'Skylark', peerName || 'peer', 'Skylark/peer', 'unit', 'note'];
      out.push(table(header, rs.map((r) => [r.name, fmt(r.value), r.peer ? fmt(r.peer.value) : '', ratio(r), r.unit, r.note ?? '']), 3));
    } else {
      out.push(table(['measure', 'value', 'unit', 'note'], rs.map((r) => [r.name, fmt(r.value), r.unit, r.note ?? '']), 1));
    }
  }
  if (!rows.length) out.push('', '(no rows)');
  if (failures.length) {
    out.push('');
    out.push('## Parts that failed (their numbers are missing above)');
    out.push('');
    for (const f of failures) out.push(`- ${f.part}: ${f.error}`);
  }
  return out.join('\n');
}

/**
 * Runs one bench part on its own (`node --import tsx bench/<part>.ts`) and prints its rows as
 * `npm run bench` would, then exits 0.
 */
export async function printPartAlone(run: () => Promise<BenchRow[]>): Promise<never> {
  const started = new Date();
  const machine = machineInfo();
  const rows = await run();
  process.stdout.write(formatReport(rows, [], machine, started) + '\n');
  process.exit(0);
}
