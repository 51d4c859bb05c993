/**
 * bench/lib/goals.ts, the goals block at the top of `npm run bench`: fed fixed rows (no bench
 * runs, no timings), it selects each goal's rows by group and name, puts the peer beside each,
 * judges met / NOT met, and prints a goal whose part did not run or failed as "not measured in this
 * run" with what measures it, never leaving it out. formatReport prints the block first.
 */
import { describe, expect, it } from 'vitest';
import { buildGoals, GOALS_TITLE, marginalFit, type GoalRow } from '../../../../bench/lib/goals.js';
import { formatGoals, formatReport, type MachineInfo } from '../../../../bench/lib/format.js';
import { memoryRows, type MemoryCase } from '../../../../bench/listener-memory.bench.js';
import type { BenchRow } from '../../../../bench/lib/report.js';

const STEPS = 'Players: every step (detail)';
const LL = 'hls.js LL-HLS (AAC 128k, 0.5 s parts)';
const ICE = 'Icecast mount (MP3 128k)';
const LISTEN = 'progressive MP3 128k (Skylark /listen)';

/** A detail row as bench/players.bench.ts writes it (the note in its format). */
function step(label: string, server: string, n: number, held: boolean, us: number, rss = 100, rssIdle = 60, alive = n): BenchRow {
  return {
    group: STEPS,
    name: `${label} [${server}] ${n.toLocaleString('en-US')} listeners: ${held ? 'held' : 'NOT held'}`,
    value: us,
    unit: 'µs/listener-s',
    note: `${held ? '' : 'some reason; '}${alive}/${n} alive (0 early reconnects); server 9.5 % of a core (idle 1.0 %), ${us} µs/listener-s, 4.00 req/listener-s, RSS ${rss} MB (+${rss - rssIdle}); client 10 % of a core; box 50 % of 200; ok; errors: none`,
  };
}

const reading = (rss: number, heapUsed: number) => ({ rss, heapUsed, heapTotal: 0, external: 0 });
const memCase = (name: string, n: number, rssDelta: number, extra: Partial<MemoryCase> = {}): MemoryCase => ({
  name,
  n,
  base: name === 'icecast2' ? null : reading(100e6, 10e6),
  loaded: name === 'icecast2' ? null : { before: reading(100e6 + rssDelta * 1.5, 0), after: reading(100e6 + rssDelta, 10e6 + n * 300) },
  rssBase: 5e6,
  rssLoaded: 5e6 + rssDelta,
  aliveAfter: n,
  ready: { opened: n, answered: n },
  top: [],
  ...extra,
});

const HTTP = 'HLS serving: Skylark (CLI process) vs nginx static, wrk -t1 10 s, median of 3, Skylark on 1 HTTP thread(s)';
const RTC = 'Listeners held: WebRTC (werift, WHEP) per Skylark process, loopback';
const RTC_STEPS = 'Listeners held: WebRTC every step (detail)';

function fullRun(): BenchRow[] {
  return [
    // 1: LL at 1,000 costs more than Icecast (not met), at 4,000 less (met).
    step(LL, 'skylark', 1000, true, 95.2),
    step(LL, 'skylark', 4000, true, 80),
    step(ICE, 'icecast2', 1000, true, 86.5),
    step(ICE, 'icecast2', 4000, true, 82.8),
    // 2: 2.9 KB per /listen listener after GC against icecast2's 1.62; a session keeps 0.29 KB of JS.
    ...memoryRows({
      n: 4000,
      failures: [],
      results: [
        memCase('session', 4000, 4000 * 3.5 * 1024, { top: [{ what: 'Session', bytesPer: 128, countPer: 1 }, { what: '(string) "sid="', bytesPer: 48, countPer: 1 }, { what: '(array) map slots', bytesPer: 121, countPer: 1 }, { what: 'gone', bytesPer: -10, countPer: -1 }] }),
        memCase('progressive', 4000, 4000 * 2.9 * 1024),
        memCase('icecast2', 4000, 4000 * 1.62 * 1024),
      ],
    }),
    // 4: the segment at ×0.96 of nginx at 100 connections, ×0.87 at 1,000; a '+titles' row that is not the goal's.
    { group: HTTP, name: 'segment 100 conns: req per server CPU-second', value: 50426, unit: 'req/CPU-s', peer: { name: 'nginx', value: 52650 } },
    { group: HTTP, name: 'segment 1000 conns: req per server CPU-second', value: 44498, unit: 'req/CPU-s', peer: { name: 'nginx', value: 51078 } },
    { group: HTTP, name: 'segment +titles 100 conns: req per server CPU-second', value: 1, unit: 'req/CPU-s', peer: { name: 'nginx', value: 1 } },
    { group: HTTP, name: 'playlist 100 conns: req per server CPU-second', value: 70701, unit: 'req/CPU-s', peer: { name: 'nginx', value: 55036 } },
    // 5: two held steps (10 % fixed, 8 µs per peer-packet), a third not held; all-in at 200 peers.
    { group: RTC, name: 'peers held with packet loss < 1 %', value: 200, unit: 'peers', note: 'Opus stream (Icecast source), 20 ms packets forwarded; 200/200 connected' },
    { group: RTC, name: 'server CPU per peer-packet', value: 18, unit: 'µs' },
    { group: RTC, name: 'peers per core at 20 ms packets (from the CPU per peer-packet)', value: 1e6 / (50 * 18), unit: 'peers' },
    { group: RTC_STEPS, name: '100 peers (held): server CPU', value: 14, unit: '% core' },
    { group: RTC_STEPS, name: '100 peers (held): peer-packets received per second', value: 5000, unit: 'packets/s' },
    { group: RTC_STEPS, name: '200 peers (held): server CPU', value: 18, unit: '% core' },
    { group: RTC_STEPS, name: '200 peers (held): peer-packets received per second', value: 10000, unit: 'packets/s' },
    { group: RTC_STEPS, name: '300 peers (not held): server CPU', value: 40, unit: '% core' },
    { group: RTC_STEPS, name: '300 peers (not held): peer-packets received per second', value: 9000, unit: 'packets/s' },
  ];
}

const byId = (goals: GoalRow[]) => new Map(goals.map((g) => [g.id, g]));

describe('buildGoals', () => {
  it('puts each measure beside its peer and judges the goal', () => {
    const g = byId(buildGoals(fullRun()));
    expect(g.get('1a')).toMatchObject({ value: 95.2, peer: { name: 'icecast2', value: 86.5 }, met: false, measured: true });
    expect(g.get('1a')!.ratio).toBeCloseTo(95.2 / 86.5, 6);
    expect(g.get('1b')).toMatchObject({ value: 80, peer: { name: 'icecast2', value: 82.8 }, met: true });

    expect(g.get('2a')!.value).toBeCloseTo(2.9, 6);
    expect(g.get('2a')!.peer!.value).toBeCloseTo(1.62, 6);
    // ×1.79 of icecast2's 1.62 KB: over the goal (≤ ×1.00).
    expect(g.get('2a')!.met).toBe(false);
    expect(g.get('2a')!.note).toContain('before GC 4.35 KB');
    // Only what grew counts: 128 + 48 + 121 bytes.
    expect(g.get('2b')!.value).toBeCloseTo(297 / 1024, 6);
    expect(g.get('2b')).toMatchObject({ peer: null, goal: '≤ 0.5 KB', met: true });

    expect(g.get('4a')).toMatchObject({ value: 50426, peer: { name: 'nginx (sendfile)', value: 52650 }, met: true });
    expect(g.get('4a')!.measure).toContain('100 connections');
    expect(g.get('4b')).toMatchObject({ value: 44498, met: false });
    expect(g.has('4c')).toBe(false);

    expect(g.get('5a')).toMatchObject({ peer: { name: 'SRS (published)', value: 2000, published: true }, met: false });
    expect(g.get('5a')!.value).toBeCloseTo(1111.1, 1);
    expect(g.get('5a')!.note).toContain('a published figure, not run here');
    // 14 % at 5,000 packets/s, 18 % at 10,000: 8 µs each, 10 % fixed → 0.9 s ÷ 400 µs = 2,250 peers.
    expect(g.get('5b')!.value).toBeCloseTo(2250, 6);
    expect(g.get('5b')!.met).toBe(true);
  });

  it('prints what did not run as not measured, with what measures it, and drops nothing', () => {
    const goals = buildGoals(fullRun());
    expect(goals.map((x) => x.id)).toEqual(['1a', '1b', '2a', '2b', '3a', '3b', '3c', '4a', '4b', '5a', '5b', '5c']);
    const g = byId(goals);
    for (const id of ['3a', '3b', '3c']) {
      expect(g.get(id)).toMatchObject({ measured: false, met: null });
      expect(g.get(id)!.note).toContain('not measured in this run');
      expect(g.get(id)!.note).toContain('BENCH_PLAYERS_STEPS_ICECAST=…,18000');
    }
    expect(g.get('5c')).toMatchObject({ measured: false });
    expect(g.get('5c')!.note).toContain('BENCH_LISTENERS_PARTS including send');
  });

  it('names the part that failed', () => {
    const goals = buildGoals([], [{ part: 'players.bench', error: 'icecast2 is not installed' }]);
    expect(goals.map((x) => x.id)).toEqual(['1a', '1b', '2a', '2b', '3a', '3b', '3c', '4', '5a', '5b', '5c']);
    expect(goals.every((x) => !x.measured && x.met === null)).toBe(true);
    expect(byId(goals).get('1a')!.note).toContain('part players.bench failed: icecast2 is not installed');
    expect(byId(goals).get('2a')!.note).toContain('listener-memory.bench');
    expect(byId(goals).get('4')!.note).toContain('part http-segments');
  });

  it('names a listener-memory case that failed, and judges /listen alone when icecast2 did not run', () => {
    const rows = memoryRows({ n: 4000, failures: ['session: the client did not answer in 90 s', 'icecast2: not installed (apt-get install -y icecast2)'], results: [memCase('progressive', 4000, 4000 * 3.0 * 1024)] });
    const g = byId(buildGoals(rows));
    expect(g.get('2a')).toMatchObject({ measured: true, met: null, peer: { name: 'icecast2' } });
    expect(g.get('2a')!.note).toContain('case icecast2: not installed');
    expect(g.get('2b')).toMatchObject({ measured: false, met: null });
    expect(g.get('2b')!.note).toContain('case session: the client did not answer in 90 s');
  });

  it('reads the fd-limit step: /listen held at 18,000, icecast2 not held there', () => {
    const rows = [step(LISTEN, 'skylark', 18000, true, 32.5, 174, 94), step(ICE, 'icecast2', 18000, false, 36, 31, 17, 9038)];
    const g = byId(buildGoals(rows));
    expect(g.get('3a')).toMatchObject({ value: 18000, peer: { name: 'icecast2', value: 9038 }, met: true });
    expect(g.get('3a')!.note).toContain('icecast2 NOT held at 18,000: 9,038 alive');
    expect(g.get('3b')).toMatchObject({ value: 32.5, peer: { value: 36 }, met: null, goal: '–' });
    expect(g.get('3c')).toMatchObject({ value: 174, peer: { value: 31 } });
    expect(g.get('3c')!.note).toContain('Skylark +80 MB, icecast2 +14 MB');
  });

  it('a step that was not held does not meet its goal', () => {
    const rows = [step(LL, 'skylark', 1000, false, 50), step(ICE, 'icecast2', 1000, true, 86.5)];
    const g = byId(buildGoals(rows));
    expect(g.get('1a')).toMatchObject({ met: false });
    expect(g.get('1a')!.note).toContain('LL step NOT held at 1,000');
    expect(g.get('1b')).toMatchObject({ measured: false });
  });

  it('fits no marginal cost from fewer than two held steps', () => {
    expect(marginalFit([{ n: 100, held: true, cpuPct: 14, packetsPerS: 5000 }])).toBeNull();
    expect(marginalFit([{ n: 100, held: true, cpuPct: 14, packetsPerS: 5000 }, { n: 200, held: false, cpuPct: 30, packetsPerS: 9000 }])).toBeNull();
  });
});

describe('formatReport', () => {
  const machine: MachineInfo = { nproc: 2, cpuModel: 'test', memGiB: 4, kernel: 'Linux', loadAvg: '0 0 0', versions: { node: 'v20' } };

  it('prints the goals block before every group', () => {
    const rows = fullRun();
    const text = formatReport(rows, [], machine, new Date(0));
    const block = text.indexOf(`## ${GOALS_TITLE}`);
    expect(block).toBeGreaterThan(0);
    expect(block).toBeLessThan(text.indexOf(`## ${STEPS}`));
    expect(block).toBeLessThan(text.indexOf(`## ${HTTP}`));
    const goals = formatGoals(buildGoals(rows));
    expect(text).toContain(goals);
    const line = (id: string) => goals.split('\n').find((l) => l.startsWith(`| ${id} `))!;
    expect(line('1a')).toMatch(/\| 95\.2 µs +\| icecast2 +\| 86\.5 µs +\| ×1\.10 +\| ≤ ×1\.00 icecast2, every part in time +\| NOT met +\|/);
    expect(line('1b')).toContain('| met ');
    expect(line('3a')).toMatch(/\| not measured +\| icecast2 +\| – +\| – +\| all 18,000 held +\| not measured +\| not measured in this run/);
    expect(line('5b')).toMatch(/\| 2,250 peers +\| SRS \(published\) +\| 2,000 peers +\| ×1\.13 /);
  });
});
