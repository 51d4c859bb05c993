/**
 * The replayer as its own process (so the bench can meter its CPU apart from the server's and its
 * own): `node --import tsx bench/lib/ingest-replay-child.ts <config.json>`.
 *
 * Config: `{ flv, protocol?: 'rtmp' | 'icecast', tickMs?, concurrency?, targets }` — RTMP
 * publishers (rtmp-replayer.ts, `PublishTarget`s) or Icecast sources sending the same frames as
 * ADTS (icecast-replayer.ts, `IcecastTarget`s). Prints JSON lines on stdout:
 * `{"ev":"ready","ok":n,"failed":[{index,reason}],"publishMs":[…]}` once every target has started
 * publishing or failed (publishMs: connect → NetStream.Publish.Start, or connect → 200 OK), then
 * `{"ev":"stats",…PoolStats}` on each SIGUSR2. SIGTERM closes every connection and exits.
 */
import { readFileSync } from 'node:fs';
import { ReplayPool, readFlvAudio, type PublishTarget } from './rtmp-replayer.js';
import { IcecastPool, type IcecastTarget } from './icecast-replayer.js';

interface Config {
  flv: string;
  protocol?: 'rtmp' | 'icecast';
  tickMs?: number;
  concurrency?: number;
  targets: Array<PublishTarget | IcecastTarget>;
}

const out = (o: unknown) => process.stdout.write(JSON.stringify(o) + '\n');

const cfg = JSON.parse(readFileSync(process.argv[2]!, 'utf8')) as Config;
const media = readFlvAudio(cfg.flv);
const concurrency = cfg.concurrency ?? 32;

let pool: ReplayPool | IcecastPool;
let started: { publishMs: number[]; failed: Array<{ index: number; reason: string }> };
if (cfg.protocol === 'icecast') {
  const icecast = new IcecastPool(media, cfg.tickMs ?? 10);
  pool = icecast;
  const { acceptMs, failed } = await icecast.publishAll(cfg.targets as IcecastTarget[], concurrency);
  started = { publishMs: acceptMs, failed };
} else {
  const rtmp = new ReplayPool(media, cfg.tickMs ?? 10);
  pool = rtmp;
  const { publishers, failed } = await rtmp.publishAll(cfg.targets as PublishTarget[], concurrency);
  const failedSet = new Set(failed.map((f) => f.index));
  started = {
    publishMs: publishers.filter((_, i) => !failedSet.has(i)).map((p) => Math.round((p.times.publishAt - p.times.connectAt) * 10) / 10),
    failed,
  };
}

process.on('SIGUSR2', () => out({ ev: 'stats', ...pool.stats() }));
process.on('SIGTERM', () => {
  pool.close();
  setTimeout(() => process.exit(0), 100);
});

out({ ev: 'ready', ok: cfg.targets.length - started.failed.length, failed: started.failed.slice(0, 10), failedCount: started.failed.length, publishMs: started.publishMs });
