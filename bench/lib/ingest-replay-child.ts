/**
 * The replayer as its own process (so the bench can meter its CPU apart from the server's and its
 * own): `node --import tsx bench/lib/ingest-replay-child.ts <config.json>`.
 *
 * Config: `{ flv, tickMs?, concurrency?, targets: PublishTarget[] }`. Prints JSON lines on stdout:
 * `{"ev":"ready","ok":n,"failed":[{index,reason}],"publishMs":[…]}` once every target has started
 * publishing or failed, then `{"ev":"stats",…PoolStats}` on each SIGUSR2. SIGTERM closes every
 * connection and exits.
 */
import { readFileSync } from 'node:fs';
import { ReplayPool, readFlvAudio, type PublishTarget } from './rtmp-replayer.js';

interface Config {
  flv: string;
  tickMs?: number;
  concurrency?: number;
  targets: PublishTarget[];
}

const out = (o: unknown) => process.stdout.write(JSON.stringify(o) + '\n');

const cfg = JSON.parse(readFileSync(process.argv[2]!, 'utf8')) as Config;
const pool = new ReplayPool(readFlvAudio(cfg.flv), cfg.tickMs ?? 10);

process.on('SIGUSR2', () => out({ ev: 'stats', ...pool.stats() }));
process.on('SIGTERM', () => {
  pool.close();
  setTimeout(() => process.exit(0), 100);
});

const { publishers, failed } = await pool.publishAll(cfg.targets, cfg.concurrency ?? 32);
out({
  ev: 'ready',
  ok: cfg.targets.length - failed.length,
  failed: failed.slice(0, 10),
  failedCount: failed.length,
  // connect → NetStream.Publish.Start, per publisher (ms)
  publishMs: publishers.map((p) => Math.round((p.times.publishAt - p.times.connectAt) * 10) / 10),
});
