// One server per port (docs/behaviour.md §1): a second `skylark serve` on a port that a running
// one holds — HTTP (whose library binds with SO_REUSEPORT, with and without HTTP worker threads),
// RTMP or the Icecast port — exits 1 with an error naming the port, and the first keeps serving.
import { spawn } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';
import { repoRoot, startCli, tempDir, type CliServer } from '../../helpers/server.js';
import path from 'node:path';

const cli = path.join(repoRoot, 'bin', 'skylark.js');

/** Runs a second `serve` with `env` on its own data dir; resolves to its exit code and stderr (it must exit by itself). */
function secondServe(env: Record<string, string>): Promise<{ code: number | null; stderr: string; stdout: string }> {
  const data = tempDir('skylark-second-');
  const child = spawn(process.execPath, [cli, 'serve'], {
    env: { ...process.env, SKYLARK_HTTP_PORT: '0', SKYLARK_RTMP_PORT: '0', SKYLARK_ICECAST_PORT: '0', SKYLARK_DATA_DIR: data.dir, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  let stdout = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d));
  child.stdout.on('data', (d: Buffer) => (stdout += d));
  const killer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  return new Promise((resolve) => {
    child.once('close', (code) => {
      clearTimeout(killer);
      data.cleanup();
      resolve({ code, stderr, stdout });
    });
  });
}

function portOf(url: string): string {
  return new URL(url).port;
}

describe.each(['1', '2'])('a second serve on a held port (the first with %s HTTP thread(s))', (threads) => {
  const data = tempDir();
  let first: CliServer;

  afterAll(async () => {
    await first?.stop();
    data.cleanup();
  });

  it.each([
    ['HTTP', 'SKYLARK_HTTP_PORT', () => portOf(first.http)],
    ['RTMP', 'SKYLARK_RTMP_PORT', () => portOf(first.rtmp)],
    ['Icecast', 'SKYLARK_ICECAST_PORT', () => portOf(first.icecast)],
  ] as const)('refuses the %s port with exit 1 and a message naming it', async (name, variable, port) => {
    first ??= await startCli(data.dir, { SKYLARK_HTTP_THREADS: threads });
    const p = port();
    const second = await secondServe({ [variable]: p });
    expect(second.code).toBe(1);
    expect(second.stdout).not.toContain('"event":"listening"');
    expect(second.stderr).toContain(`${name} port ${p} on 127.0.0.1 is in use by another process`);
    // The first still answers every request, from its own database: no second process joined the port.
    for (let i = 0; i < 8; i++) {
      const res = await fetch(`${first.http}/v2/streams`);
      expect(res.status).toBe(401);
    }
  });
});
