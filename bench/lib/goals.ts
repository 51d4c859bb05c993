/**
 * The listener-side goals of `npm run bench`, one block at the top of the report: each output
 * (LL-HLS, progressive, HLS serving, WebRTC) beside its best peer, the ratio, the goal and whether
 * it is met (docs/benchmarks.md "How to run", "The goals block").
 *
 * Built from the rows of the run only, selected by group and name (the parts that measure them do
 * not know about this block). A goal whose source part did not run, failed, or did not reach the
 * step it needs is printed as "not measured in this run" with what measures it; none is dropped.
 */
import type { BenchRow } from './report.js';

export const GOALS_TITLE = 'Listeners per core: each output against its best peer';

/** One line of the block. */
export interface GoalRow {
  /** '1a', '1b', …: the goal's number and its measure. */
  id: string;
  measure: string;
  /** Skylark's value; NaN when not measured. */
  value: number;
  unit: string;
  /** The peer's value for the same measure: measured in the same run, or a published figure. */
  peer: { name: string; value: number; published?: boolean } | null;
  /** value ÷ peer value (NaN without both). */
  ratio: number;
  /** The goal in words ('≤ ×1.00 icecast2'), or '–' for a row that is reported beside a goal. */
  goal: string;
  /** true / false when judged; null when there is no goal on this row or it was not measured. */
  met: boolean | null;
  measured: boolean;
  /** Where it comes from, at which step, and what qualifies it. */
  note: string;
}

/** The group and row names bench/listener-memory.bench.ts writes (goal 2). */
export const MEMORY_GROUP = 'Listener memory after a full GC (bench/listener-memory.ts, loopback)';
export const MEMORY_ROWS = {
  progressiveAfterGc: 'progressive /listen: RSS Δ per listener after GC',
  progressiveBeforeGc: 'progressive /listen: RSS Δ per listener before GC',
  sessionJs: 'HLS session: JS heap per session (heap snapshot)',
  sessionHeapUsed: 'HLS session: heapUsed Δ per session after GC',
} as const;

/**
 * SRS's published WebRTC figure: ≈ 2,000 players per core (its benchmark of audio fan-out), the
 * goal of the WebRTC rows. A published figure, not a run; Janus runs in the same run as a measured
 * peer (docs/bench/webrtc-listeners.md).
 */
export const SRS_WEBRTC_PER_CORE = 2000;
/** The progressive step at the file-descriptor limit of the bench box (20,000 per process). */
export const FD_LIMIT_STEP = 18_000;

type Failure = { part: string; error: string };

const PLAYERS_STEPS_GROUP = 'Players: every step (detail)';
const HTTP_GROUP_PREFIX = 'HLS serving: Skylark (CLI process) vs nginx static, wrk';
const RTC_GROUP = 'Listeners held: WebRTC (werift, WHEP) per Skylark process, loopback';
export const RTC_STEPS_GROUP = 'Listeners held: WebRTC every step (detail)';
const RTC_SEND_GROUP_PREFIX = 'WebRTC fan-out: send path alone';

/** One step of bench/players.bench.ts, read from its detail row. */
interface PlayerStep {
  label: string;
  server: string;
  n: number;
  held: boolean;
  usPerListenerS: number;
  alive: number;
  rssMb: number;
  rssDeltaMb: number;
  note: string;
}

function playerSteps(rows: BenchRow[]): PlayerStep[] {
  const out: PlayerStep[] = [];
  for (const r of rows) {
    if (r.group !== PLAYERS_STEPS_GROUP) continue;
    const m = /^(.*) \[([^\]]+)\] ([\d,]+) listeners: (held|NOT held)$/.exec(r.name);
    if (!m) continue;
    const note = r.note ?? '';
    const alive = /(\d+)\/(\d+) alive/.exec(note);
    const rss = /RSS (\d+(?:\.\d+)?) MB \(\+?(-?\d+(?:\.\d+)?)\)/.exec(note);
    out.push({
      label: m[1]!,
      server: m[2]!,
      n: Number(m[3]!.replaceAll(',', '')),
      held: m[4] === 'held',
      usPerListenerS: r.value,
      alive: alive ? Number(alive[1]) : NaN,
      rssMb: rss ? Number(rss[1]) : NaN,
      rssDeltaMb: rss ? Number(rss[2]) : NaN,
      note,
    });
  }
  return out;
}

const count = (n: number) => n.toLocaleString('en-US');
const ratioOf = (v: number, p: number | undefined) => (p !== undefined && Number.isFinite(v) && Number.isFinite(p) && p !== 0 ? v / p : NaN);

/** How a part is asked for, and whether it failed in this run. */
function why(failures: Failure[], part: string, how: string): string {
  const f = failures.find((x) => x.part === part);
  return `not measured in this run: ${how}${f ? ` (part ${part} failed: ${f.error.slice(0, 160)})` : ''}`;
}

function notMeasured(id: string, measure: string, unit: string, peerName: string | null, goal: string, note: string): GoalRow {
  return { id, measure, value: NaN, unit, peer: peerName ? { name: peerName, value: NaN } : null, ratio: NaN, goal, met: null, measured: false, note };
}

const stepsOf = (steps: PlayerStep[]) => steps.map((s) => `${count(s.n)}${s.held ? '✓' : '✗'}`).join(' ') || 'none';
/** Why icecast2 has no value at `n`: its mode did not run, or stopped before `n` (it stops at the first step not held). */
const noPeerStep = (ice: PlayerStep[], n: number) =>
  ice.length ? `icecast2 has no ${count(n)} step in this run (steps ${stepsOf(ice)})` : `icecast2 did not run (BENCH_PLAYERS_MODES must include icecast, with ${count(n)} in BENCH_PLAYERS_STEPS_ICECAST)`;

// ── 1. LL-HLS CPU per listener-second vs Icecast at 1,000 and 4,000 ─────────────────────────────

function goalLl(steps: PlayerStep[], failures: Failure[]): GoalRow[] {
  const ll = steps.filter((s) => s.server === 'skylark' && s.label.startsWith('hls.js LL-HLS'));
  const ice = steps.filter((s) => s.server === 'icecast2');
  const out: GoalRow[] = [];
  for (const [id, n] of [
    ['1a', 1000],
    ['1b', 4000],
  ] as const) {
    const measure = `LL-HLS listener (hls.js, 0.5 s parts): server CPU per listener-second at ${count(n)}`;
    const goal = '≤ ×1.00 icecast2, every part in time';
    const s = ll.find((x) => x.n === n);
    const p = ice.find((x) => x.n === n);
    const env = `BENCH_PLAYERS_MODES=hlsjs-ll,icecast with ${count(n)} in BENCH_PLAYERS_STEPS_LL and BENCH_PLAYERS_STEPS_ICECAST (part players.bench)`;
    if (!s) {
      out.push(notMeasured(id, measure, 'µs', 'icecast2', goal, `${why(failures, 'players.bench', env)}; LL steps run: ${stepsOf(ll)}`));
      continue;
    }
    const ratio = ratioOf(s.usPerListenerS, p?.usPerListenerS);
    const notes = [`players.bench, ${s.label}, server CPU above idle`];
    if (!s.held) notes.push(`LL step NOT held at ${count(n)}`);
    if (!p) notes.push(noPeerStep(ice, n));
    else if (!p.held) notes.push(`icecast2 NOT held at ${count(n)}`);
    out.push({
      id,
      measure,
      value: s.usPerListenerS,
      unit: 'µs',
      peer: p ? { name: 'icecast2', value: p.usPerListenerS } : { name: 'icecast2', value: NaN },
      ratio,
      goal,
      met: p && Number.isFinite(ratio) ? s.held && ratio <= 1 : null,
      measured: true,
      note: notes.join('; '),
    });
  }
  return out;
}

// ── 2. Memory per progressive listener and per HLS session ──────────────────────────────────────

function goalMemory(rows: BenchRow[], failures: Failure[]): GoalRow[] {
  const find = (name: string) => rows.find((r) => r.group === MEMORY_GROUP && r.name === name);
  const how = 'part listener-memory.bench (BENCH_MEMORY_CASES must include';
  /** A case that failed inside the part (its row 'case failed', the note starting with the case). */
  const caseFailed = (c: string) => {
    const f = rows.find((r) => r.group === MEMORY_GROUP && r.name === 'case failed' && (r.note ?? '').startsWith(`${c}:`));
    return f ? `; case ${(f.note ?? '').slice(0, 160)}` : '';
  };
  const out: GoalRow[] = [];
  const prog = find(MEMORY_ROWS.progressiveAfterGc);
  const measureP = 'memory per progressive (/listen) listener, RSS after GC';
  const goalP = '≤ ×1.00 icecast2';
  if (!prog || !Number.isFinite(prog.value)) {
    out.push(notMeasured('2a', measureP, 'KB', 'icecast2', goalP, why(failures, 'listener-memory.bench', `${how} progressive,icecast2)`) + caseFailed('progressive')));
  } else {
    const ice = prog.peer?.value;
    const ratio = ratioOf(prog.value, ice);
    const before = find(MEMORY_ROWS.progressiveBeforeGc);
    out.push({
      id: '2a',
      measure: measureP,
      value: prog.value,
      unit: 'KB',
      peer: { name: 'icecast2', value: ice ?? NaN },
      ratio,
      goal: goalP,
      met: Number.isFinite(ratio) ? ratio <= 1 : null,
      measured: true,
      note: [
        'listener-memory.bench, case progressive; icecast2: case icecast2, its RSS Δ (C: no GC)',
        before && Number.isFinite(before.value) ? `before GC ${before.value.toFixed(2)} KB` : '',
        ice === undefined || !Number.isFinite(ice) ? `icecast2 not measured (case icecast2; apt-get install -y icecast2)${caseFailed('icecast2')}` : '',
        prog.note ?? '',
      ]
        .filter(Boolean)
        .join('; '),
    });
  }
  const sess = find(MEMORY_ROWS.sessionJs);
  const measureS = 'memory per HLS listener session, JS heap';
  if (!sess || !Number.isFinite(sess.value)) {
    out.push(notMeasured('2b', measureS, 'KB', null, '≤ 0.5 KB', why(failures, 'listener-memory.bench', `${how} session; BENCH_MEMORY_SNAPSHOT=1)`) + caseFailed('session')));
  } else {
    const used = find(MEMORY_ROWS.sessionHeapUsed);
    out.push({
      id: '2b',
      measure: measureS,
      value: sess.value,
      unit: 'KB',
      peer: null,
      ratio: NaN,
      goal: '≤ 0.5 KB',
      met: sess.value <= 0.5,
      measured: true,
      note: [
        'listener-memory.bench, case session: heap snapshot, connected minus after they left; no peer keeps HLS sessions',
        used && Number.isFinite(used.value) ? `heapUsed Δ after GC ${used.value.toFixed(2)} KB` : '',
        sess.note ?? '',
      ]
        .filter(Boolean)
        .join('; '),
    });
  }
  return out;
}

// ── 3. Progressive listeners at the file-descriptor limit ───────────────────────────────────────

function goalFdLimit(steps: PlayerStep[], failures: Failure[]): GoalRow[] {
  const n = FD_LIMIT_STEP;
  const listen = steps.filter((s) => s.server === 'skylark' && s.label.includes('/listen'));
  const ice = steps.filter((s) => s.server === 'icecast2');
  const s = listen.find((x) => x.n === n);
  const p = ice.find((x) => x.n === n);
  const at = `at ${count(n)} (fd limit)`;
  const measures = [
    { id: '3a', measure: `progressive (/listen) listeners held ${at}`, unit: 'listeners', goal: `all ${count(n)} held` },
    { id: '3b', measure: `progressive (/listen): server CPU per listener-second ${at}`, unit: 'µs', goal: '–' },
    { id: '3c', measure: `progressive (/listen): server RSS ${at}`, unit: 'MB', goal: '–' },
  ];
  if (!s) {
    const how = why(failures, 'players.bench', `BENCH_PLAYERS_MODES=listen,icecast BENCH_PLAYERS_STEPS_ICECAST=…,${n} (part players.bench; /listen and icecast2)`);
    return measures.map((m) => notMeasured(m.id, m.measure, m.unit, 'icecast2', m.goal, `${how}; /listen steps run: ${stepsOf(listen)}`));
  }
  const peerNote = !p ? noPeerStep(ice, n) : p.held ? '' : `icecast2 NOT held at ${count(n)}: ${Number.isFinite(p.alive) ? count(p.alive) : '?'} alive`;
  const heldValue = (x: PlayerStep) => (x.held ? x.n : Number.isFinite(x.alive) ? x.alive : 0);
  const row = (m: (typeof measures)[number], v: number, pv: number | undefined, met: boolean | null, note: string): GoalRow => ({
    id: m.id,
    measure: m.measure,
    value: v,
    unit: m.unit,
    peer: { name: 'icecast2', value: pv ?? NaN },
    ratio: ratioOf(v, pv),
    goal: m.goal,
    met,
    measured: true,
    note: [note, peerNote].filter(Boolean).join('; '),
  });
  return [
    row(measures[0]!, heldValue(s), p ? heldValue(p) : undefined, s.held, `players.bench, modes listen and icecast; ${s.held ? 'held' : `NOT held: ${Number.isFinite(s.alive) ? count(s.alive) : '?'} alive`}; listeners held with every one at ≥ 95 % of 16,000 B/s over whole arrivals and never more than 1 s behind real time (bench/lib/listener-rate.ts)`),
    row(measures[1]!, s.usPerListenerS, p?.usPerListenerS, null, 'server CPU above idle ÷ listener-seconds'),
    row(measures[2]!, s.rssMb, p?.rssMb, null, `VmRSS at the window's end; over idle: Skylark +${Number.isFinite(s.rssDeltaMb) ? s.rssDeltaMb : '?'} MB${p ? `, icecast2 +${Number.isFinite(p.rssDeltaMb) ? p.rssDeltaMb : '?'} MB` : ''}`),
  ];
}

// ── 4. HLS segment serving per CPU-second vs nginx ──────────────────────────────────────────────

function goalSegments(rows: BenchRow[], failures: Failure[]): GoalRow[] {
  const found = rows
    .filter((r) => r.group.startsWith(HTTP_GROUP_PREFIX))
    .map((r) => ({ r, m: /^segment (\d+) conns: req per server CPU-second$/.exec(r.name) }))
    .filter((x) => x.m)
    .map((x) => ({ r: x.r, conns: Number(x.m![1]) }))
    .sort((a, b) => a.conns - b.conns);
  const goal = '≥ ×0.90 nginx';
  if (!found.length) {
    return [notMeasured('4', 'HLS segment GETs (2 s, 33 KB) per server CPU-second', 'req/CPU-s', 'nginx (sendfile)', goal, why(failures, 'http-segments', 'part http-segments (wrk, nginx)'))];
  }
  return found.map(({ r, conns }, i) => {
    const pv = r.peer?.value;
    const ratio = ratioOf(r.value, pv);
    return {
      id: `4${String.fromCharCode(97 + i)}`,
      measure: `HLS segment GETs (2 s, 33 KB) per server CPU-second, ${count(conns)} connections`,
      value: r.value,
      unit: 'req/CPU-s',
      peer: { name: 'nginx (sendfile)', value: pv ?? NaN },
      ratio,
      goal,
      met: Number.isFinite(ratio) ? ratio >= 0.9 : null,
      measured: true,
      note: `http-segments, wrk ${r.group.slice(HTTP_GROUP_PREFIX.length).trim()}${pv === undefined ? '; nginx not run (apt-get install -y nginx)' : ''}`,
    };
  });
}

// ── 5. WebRTC peers per core, 20 ms Opus, < 1 % loss, vs SRS's published figure ─────────────

interface RtcStep {
  n: number;
  held: boolean;
  cpuPct: number;
  packetsPerS: number;
}

function rtcSteps(rows: BenchRow[]): RtcStep[] {
  const by = new Map<number, RtcStep>();
  for (const r of rows) {
    if (r.group !== RTC_STEPS_GROUP) continue;
    const m = /^(\d+) peers \((held|not held)\): (server CPU|peer-packets received per second)$/.exec(r.name);
    if (!m) continue;
    const n = Number(m[1]);
    const s = by.get(n) ?? { n, held: m[2] === 'held', cpuPct: NaN, packetsPerS: NaN };
    if (m[3] === 'server CPU') s.cpuPct = r.value;
    else s.packetsPerS = r.value;
    by.set(n, s);
  }
  return [...by.values()].sort((a, b) => a.n - b.n);
}

/**
 * The marginal cost of a peer-packet and the fixed CPU, by a least-squares line through the held
 * steps: CPU (µs/s) = fixed + marginal × peer-packets per second (docs/benchmarks.md "WebRTC fan-out").
 */
export function marginalFit(steps: RtcStep[]): { fixedPct: number; marginalUs: number } | null {
  const pts = steps.filter((s) => s.held && Number.isFinite(s.cpuPct) && s.packetsPerS > 0).map((s) => [s.packetsPerS, s.cpuPct * 1e4] as const);
  if (pts.length < 2) return null;
  const mx = pts.reduce((a, [x]) => a + x, 0) / pts.length;
  const my = pts.reduce((a, [, y]) => a + y, 0) / pts.length;
  const sxx = pts.reduce((a, [x]) => a + (x - mx) ** 2, 0);
  if (sxx === 0) return null;
  const marginalUs = pts.reduce((a, [x, y]) => a + (x - mx) * (y - my), 0) / sxx;
  return { fixedPct: (my - marginalUs * mx) / 1e4, marginalUs };
}

function goalWebrtc(rows: BenchRow[], failures: Failure[]): GoalRow[] {
  const peer = { name: 'SRS (published)', value: SRS_WEBRTC_PER_CORE, published: true };
  const goal = `≥ ${count(SRS_WEBRTC_PER_CORE)} peers per core (≥ ×1.00)`;
  const published = `peer: SRS's published ≈ ${count(SRS_WEBRTC_PER_CORE)} players per core, a published figure, not run here (Janus runs in the same run: docs/bench/webrtc-listeners.md)`;
  const row = (id: string, measure: string, v: number, note: string, judged = true): GoalRow => {
    const ratio = ratioOf(v, peer.value);
    return { id, measure, value: v, unit: 'peers', peer, ratio, goal: judged ? goal : '–', met: judged && Number.isFinite(ratio) ? ratio >= 1 : null, measured: true, note: `${note}; ${published}` };
  };
  const out: GoalRow[] = [];
  const how = (parts: string) => why(failures, 'listeners.bench', `part listeners.bench with BENCH_LISTENERS_PARTS including ${parts}`);
  const held = rows.find((r) => r.group === RTC_GROUP && r.name === 'peers held with packet loss < 1 %');
  const failed = rows.find((r) => r.group === RTC_GROUP && r.name === 'failed');
  const opus = !held || (held.note ?? '').includes('20 ms');
  const allIn = rows.find((r) => r.group === RTC_GROUP && r.name.startsWith('peers per core at 20 ms packets'));
  const mA = 'WebRTC peers per core, 20 ms Opus, < 1 % loss: all-in';
  const mB = 'WebRTC peers per core, 20 ms Opus, < 1 % loss: marginal';
  const rtcMissing = failed ? `WebRTC part failed: ${failed.note ?? ''}` : !held ? how('webrtc') : !opus ? 'not measured in this run: the WebRTC source was AAC (60 ms packets); unset BENCH_LISTENERS_WEBRTC_SOURCE' : '';
  const steps = rtcSteps(rows);
  const stepsRun = steps.map((s) => `${s.n}${s.held ? '✓' : '✗'}`).join(' ') || 'none';
  if (allIn && opus && Number.isFinite(allIn.value)) {
    const perPacket = rows.find((r) => r.group === RTC_GROUP && r.name === 'server CPU per peer-packet');
    out.push(row('5a', mA, allIn.value, `listeners.bench webrtc: 1 s ÷ (50 × ${perPacket ? perPacket.value.toFixed(1) : '?'} µs, all the server's CPU per peer-packet) at the largest held step, ${held?.value ?? '?'} peers`));
  } else {
    out.push(notMeasured('5a', mA, 'peers', peer.name, goal, rtcMissing || `not measured in this run: no WebRTC step held (steps ${stepsRun}; ${held?.note ?? ''}); BENCH_LISTENERS_WEBRTC_STEPS`));
  }
  const fit = opus ? marginalFit(steps) : null;
  if (fit && fit.marginalUs > 0) {
    const perCore = (1e6 * (1 - fit.fixedPct / 100)) / (50 * fit.marginalUs);
    out.push(row('5b', mB, perCore, `listeners.bench webrtc: (100 % − ${fit.fixedPct.toFixed(1)} % fixed) ÷ (50 × ${fit.marginalUs.toFixed(1)} µs marginal), a line through the held steps ${steps.filter((s) => s.held).map((s) => s.n).join(', ')}`));
  } else {
    out.push(notMeasured('5b', mB, 'peers', peer.name, goal, rtcMissing || `not measured in this run: needs two held WebRTC steps (run: ${stepsRun}; BENCH_LISTENERS_WEBRTC_STEPS, e.g. 100,300,600)`));
  }
  const send = rows.find((r) => r.group.startsWith(RTC_SEND_GROUP_PREFIX) && r.name.startsWith('native: RtpFanout.send') && r.name.includes('AES_CM'));
  const mC = 'WebRTC peers per core: native send path alone (SRTP AES-CM, no receiver work)';
  if (send && Number.isFinite(send.value) && send.value > 0) {
    out.push(row('5c', mC, 1e6 / (50 * send.value), `listeners.bench send: 1 s ÷ (50 × ${send.value.toFixed(2)} µs per peer-packet), an upper bound for the fan-out (no werift, receivers that never read)`, false));
  } else {
    out.push(notMeasured('5c', mC, 'peers', peer.name, '–', how('send')));
  }
  // The peer is a published figure: it stands beside the row even when Skylark's side did not run.
  for (const r of out) if (!r.measured) r.peer = peer;
  return out;
}

/** The block's rows from all rows of the run (and the parts that failed). */
export function buildGoals(rows: BenchRow[], failures: Failure[] = []): GoalRow[] {
  const steps = playerSteps(rows);
  return [...goalLl(steps, failures), ...goalMemory(rows, failures), ...goalFdLimit(steps, failures), ...goalSegments(rows, failures), ...goalWebrtc(rows, failures)];
}
