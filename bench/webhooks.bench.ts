/**
 * Webhook delivery: the real engine (SQLite queue on disk, Piscina signing,
 * node:http keep-alive) delivering to a local receiver in a child process, with 1, 10 and 100
 * endpoints:
 * - burst: N events recorded at once (6,000 deliveries per case) → deliveries per second until the
 *   last one is committed as delivered;
 * - paced: 2,000 deliveries/s offered for 3 s (events recorded every 10 ms through the Outbox, as a
 *   feature would) → achieved deliveries/s, p50/p99 enqueue-to-delivery (from the event's commit to the
 *   receiver's 2xx being back), and lost deliveries (must be 0);
 * - signing: HMAC-SHA256 of a 600-byte event in Piscina workers (batched, as the engine does) vs on
 *   the main thread, and how busy the main thread's event loop is for each.
 * `npx tsx bench/webhooks.bench.ts` prints the rows.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { createInterface } from 'node:readline';
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { openDatabase } from '../src/base/db/database.js';
import { EventsRepo } from '../src/base/db/events-repo.js';
import { WebhooksRepo } from '../src/base/db/webhooks-repo.js';
import { Outbox } from '../src/base/outbox.js';
import { WebhooksService } from '../src/control/services/webhooks.js';
import { Dispatcher } from '../src/control/webhooks/dispatch.js';
import { postOnce } from '../src/control/webhooks/post.js';
import { MainThreadSigner, PiscinaSigner, type Signer } from '../src/control/webhooks/signer.js';
import { createLogger } from '../src/base/logger.js';
import type { BenchRow } from './lib/report.js';

const RECEIVER = `
const http = require('node:http');
const s = http.createServer({ keepAliveTimeout: 30000 }, (req, res) => { req.resume(); req.on('end', () => { res.writeHead(200, { 'Content-Length': '0' }); res.end(); }); });
s.listen(0, '127.0.0.1', () => console.log(s.address().port));
`;

async function startReceiver(): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, ['-e', RECEIVER], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<string>((resolve) => createInterface({ input: child.stdout! }).once('line', resolve));
  return { url: `http://127.0.0.1:${port.trim()}`, child };
}

const percentile = (xs: number[], p: number) => {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};

/** One engine over a fresh database with `endpoints` webhooks subscribed to everything. */
async function world(receiverUrl: string, endpoints: number) {
  const dir = mkdtempSync(path.join(tmpdir(), 'skylark-bench-wh-'));
  const db = openDatabase(dir);
  db.prepare("INSERT INTO accounts (id, name, plan, default_region, created_at) VALUES ('acct_b', 'B', 'paid', 'eu-west-1', 0)").run();
  const outbox = new Outbox(new EventsRepo(db));
  const repo = new WebhooksRepo(db);
  const service = new WebhooksService({ db, repo, outbox, nodeSecret: randomBytes(32), allowPrivate: true, wake: () => {} });
  for (let i = 0; i < endpoints; i++) await service.create('acct_b', { url: `${receiverUrl}/ep${i}`, events: ['*'] });
  const enqueued = new Map<string, number>();
  const latencies: number[] = [];
  let delivered = 0;
  let lastAt = 0;
  const signer = new PiscinaSigner();
  const engine = new Dispatcher({
    repo,
    signer,
    secretOf: (row) => service.secretOf(row),
    log: createLogger('error'),
    allowPrivate: true,
    post: async (o) => {
      const r = await postOnce(o);
      if (r.status !== null && r.status < 300) {
        delivered++;
        lastAt = performance.now();
        const t0 = enqueued.get(o.headers['Idempotency-Key']!);
        if (t0 !== undefined) latencies.push(lastAt - t0);
      }
      return r;
    },
  });
  outbox.subscribe(() => engine.notify());
  engine.start();
  const payload = { object: { id: 'lst_bench', object: 'listener', streamId: 'stm_bench', protocol: 'hls', country: null, userAgent: 'x'.repeat(300) } };
  return {
    record(n: number) {
      const t = performance.now();
      db.transaction(() => {
        for (let i = 0; i < n; i++) enqueued.set(outbox.record('acct_b', 'listener.joined', payload).id, t);
      })();
      outbox.flush();
    },
    stats: () => ({ delivered, lastAt, latencies }),
    notDelivered: () => db.prepare("SELECT COUNT(*) FROM webhook_deliveries WHERE status != 'delivered'").pluck().get() as number,
    async drain(total: number, timeoutMs: number) {
      const deadline = performance.now() + timeoutMs;
      while (delivered < total && performance.now() < deadline) await new Promise((r) => setTimeout(r, 5));
      await engine.idle();
    },
    async close() {
      await engine.close();
      await signer.close();
      db.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function burst(url: string, endpoints: number): Promise<BenchRow[]> {
  const total = 6000;
  const w = await world(url, endpoints);
  try {
    const events = total / endpoints;
    const t0 = performance.now();
    w.record(events);
    await w.drain(total, 60_000);
    const s = w.stats();
    const rate = s.delivered / ((s.lastAt - t0) / 1000);
    return [{ group: 'webhooks', name: `burst deliveries/s, ${endpoints} endpoint${endpoints > 1 ? 's' : ''}`, value: Math.round(rate), unit: 'deliveries/s', note: `${s.delivered}/${total} delivered, ${w.notDelivered()} not delivered` }];
  } finally {
    await w.close();
  }
}

async function paced(url: string, endpoints: number): Promise<BenchRow[]> {
  const offered = 2000; // deliveries per second
  const seconds = 3;
  const w = await world(url, endpoints);
  try {
    const tickMs = 10;
    const perTickDeliveries = (offered * tickMs) / 1000; // 20
    const eventsPerTick = Math.max(1, Math.round(perTickDeliveries / endpoints));
    const ticksNeeded = Math.round((offered * seconds) / (eventsPerTick * endpoints));
    const tickEvery = (seconds * 1000) / ticksNeeded;
    const t0 = performance.now();
    for (let i = 0; i < ticksNeeded; i++) {
      const due = t0 + i * tickEvery;
      const wait = due - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      w.record(eventsPerTick);
    }
    const total = ticksNeeded * eventsPerTick * endpoints;
    await w.drain(total, 60_000);
    const s = w.stats();
    const rate = s.delivered / ((s.lastAt - t0) / 1000);
    const lost = w.notDelivered();
    const tag = `${endpoints} endpoint${endpoints > 1 ? 's' : ''}`;
    return [
      { group: 'webhooks', name: `paced 2,000/s offered: delivered/s, ${tag}`, value: Math.round(rate), unit: 'deliveries/s', note: `${s.delivered}/${total} delivered, ${lost} lost` },
      { group: 'webhooks', name: `paced 2,000/s: p50 enqueue→delivered, ${tag}`, value: +percentile(s.latencies, 50).toFixed(1), unit: 'ms' },
      { group: 'webhooks', name: `paced 2,000/s: p99 enqueue→delivered, ${tag}`, value: +percentile(s.latencies, 99).toFixed(1), unit: 'ms' },
    ];
  } finally {
    await w.close();
  }
}

async function signing(): Promise<BenchRow[]> {
  const body = JSON.stringify({ id: 'evt_' + 'x'.repeat(24), object: 'event', type: 'listener.joined', created: 1773532800, livemode: true, data: { object: { id: 'lst_1', userAgent: 'y'.repeat(420) } } });
  const secret = 'whsec_' + 'k'.repeat(32);
  const n = 20_000;
  const run = async (signer: Signer) => {
    // warm up
    await Promise.all(Array.from({ length: 500 }, (_, i) => signer.sign(secret, i, body)));
    const elu0 = performance.eventLoopUtilization();
    const t0 = performance.now();
    for (let done = 0; done < n; done += 1000) await Promise.all(Array.from({ length: 1000 }, (_, i) => signer.sign(secret, 1773532800 + done + i, body)));
    const ms = performance.now() - t0;
    const elu = performance.eventLoopUtilization(elu0);
    return { rate: n / (ms / 1000), busyUsPerSig: (elu.active * 1000) / n };
  };
  const pool = new PiscinaSigner();
  const piscina = await run(pool);
  await pool.close();
  const main = await run(new MainThreadSigner());
  return [
    { group: 'webhooks', name: 'signing in Piscina workers (batched)', value: Math.round(piscina.rate), unit: 'signatures/s', peer: { name: 'main thread', value: Math.round(main.rate) } },
    {
      group: 'webhooks',
      name: 'main-thread busy time per signature, Piscina',
      value: +piscina.busyUsPerSig.toFixed(2),
      unit: 'µs',
      peer: { name: 'main thread', value: +main.busyUsPerSig.toFixed(2) },
      note: '600-byte event; what signing costs the event loop that serves HTTP',
    },
  ];
}

/** The rows of this bench (BenchRun). */
export async function run(): Promise<BenchRow[]> {
  const rows: BenchRow[] = [];
  const rx = await startReceiver();
  try {
    for (const n of [1, 10, 100]) rows.push(...(await burst(rx.url, n)));
    for (const n of [1, 10, 100]) rows.push(...(await paced(rx.url, n)));
  } finally {
    rx.child.kill();
  }
  rows.push(...(await signing()));
  return rows;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  run().then(
    (rows) => {
      for (const r of rows) console.log(`${r.name.padEnd(52)} ${String(r.value).padStart(10)} ${r.unit}${r.peer ? `   (${r.peer.name}: ${r.peer.value})` : ''}${r.note ? `   ${r.note}` : ''}`);
    },
    (e) => {
      console.error(e);
      process.exitCode = 1;
    },
  );
}
