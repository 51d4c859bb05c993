/**
 * A load-client process of bench/players.bench.ts: runs one `PlayerConfig` (bench/lib/player-client.ts)
 * and prints its `PlayerReport` as one JSON line at `exitAt`, then exits.
 *
 * Run: `node --import tsx bench/lib/player-client-child.ts '<PlayerConfig JSON>'`, under a raised
 * fd limit (bench/lib/proc.ts `spawnWithFds`): an hlsjs-ll listener holds two connections.
 */
import { PlayerRun, type PlayerConfig } from './player-client.js';

const cfg = JSON.parse(process.argv[2] ?? '{}') as PlayerConfig;
const run = new PlayerRun(cfg);
run.start();
setTimeout(() => {
  const out = JSON.stringify(run.report());
  run.stop();
  process.stdout.write(out + '\n', () => process.exit(0));
}, Math.max(0, cfg.exitAt - Date.now()));
