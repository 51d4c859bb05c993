/**
 * `skylark serve` with one HTTP thread caps glibc's malloc arenas at two before its code loads
 * (bin/skylark.js, docs/decisions.md "Giving freed memory back"): the main thread's and one the other
 * threads share; with more HTTP threads glibc's default stays; glibc's own MALLOC_ARENA_MAX, when
 * set, wins. Read from the
 * running server's /proc/PID/maps: a thread arena is glibc's per-thread heap, a 64 MiB-aligned
 * anonymous read-write mapping followed by its reserved rest, 64 MiB in all.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startCli, type CliServer } from '../../helpers/server.js';

const glibc = process.platform === 'linux' && Boolean((process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined)?.header?.glibcVersionRuntime);
const MIB64 = 64n << 20n;

/** glibc's thread arenas in `pid`'s address space. */
function threadArenas(pid: number): number {
  const maps = readFileSync(`/proc/${pid}/maps`, 'utf8').split('\n').map((l) => l.split(/\s+/));
  let n = 0;
  for (let i = 0; i + 1 < maps.length; i++) {
    const [range, perms, , , inode, file] = maps[i]!;
    const [nextRange, nextPerms, , , nextInode, nextFile] = maps[i + 1]!;
    if (!range || !nextRange || perms !== 'rw-p' || nextPerms !== '---p' || inode !== '0' || nextInode !== '0' || file || nextFile) continue;
    const [a, b] = range.split('-').map((x) => BigInt('0x' + x)) as [bigint, bigint];
    const [c, d] = nextRange.split('-').map((x) => BigInt('0x' + x)) as [bigint, bigint];
    if (a % MIB64 === 0n && b === c && d - a === MIB64) n++;
  }
  return n;
}

const dirs: string[] = [];
const servers: CliServer[] = [];
afterAll(async () => {
  await Promise.all(servers.map((s) => s.stop()));
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** A served node's thread arenas after some HTTP traffic. */
async function arenasOf(env: Record<string, string>): Promise<number> {
  const dir = mkdtempSync(path.join(tmpdir(), 'skylark-arenas-'));
  dirs.push(dir);
  const s = await startCli(dir, env);
  servers.push(s);
  for (let i = 0; i < 20; i++) await (await fetch(`${s.http}/healthz`)).arrayBuffer();
  return threadArenas(s.child.pid!);
}

describe('malloc arenas of a running node', () => {
  it.runIf(glibc)('are capped at two with one HTTP thread, left to glibc with more or when MALLOC_ARENA_MAX is set', async () => {
    const [one, two, operator] = await Promise.all([
      arenasOf({ SKYLARK_HTTP_THREADS: '1' }),
      arenasOf({ SKYLARK_HTTP_THREADS: '2' }),
      arenasOf({ SKYLARK_HTTP_THREADS: '1', MALLOC_ARENA_MAX: '16' }),
    ]);
    // The main arena is not a thread arena: a cap of 2 leaves at most one of them.
    expect(one).toBeLessThanOrEqual(1);
    // Without the cap, V8's helper threads that compile the node's code as it loads take one each.
    expect(two).toBeGreaterThan(one);
    expect(operator).toBeGreaterThan(one);
  });
});
