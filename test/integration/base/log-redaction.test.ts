/**
 * A stream key mistyped into the RTMP application path (OBS "Server" = `rtmp://host/live/<key>`)
 * is refused, and the log line that says so names the application without the key
 * (docs/behaviour.md §2: the key never appears in a log line): `skylark serve` as a child process, a real
 * FFmpeg publisher.
 *
 * The CLI runs the compiled code (bin/skylark.js → dist/): run `npx tsc -p tsconfig.build.json` first.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { api, repoRoot, startCli, tempDir, waitFor, type CliServer } from '../../helpers/server.js';
import { exited, publish } from '../../helpers/publish.js';

describe('a stream key in the RTMP application path', () => {
  const tmp = tempDir('skylark-redact-');
  let server: CliServer;

  beforeAll(async () => {
    if (!existsSync(path.join(repoRoot, 'dist', 'cli', 'main.js'))) throw new Error('dist/ is missing: run `npx tsc -p tsconfig.build.json` before this test');
    server = await startCli(tmp.dir, { SKYLARK_LOG_LEVEL: 'debug' });
  });
  afterAll(async () => {
    await server?.stop();
    tmp.cleanup();
  });

  it('is refused and logged redacted', async () => {
    const key = (await waitFor(() => /^secretKey: (svc_sk_\w+)$/m.exec(server.stderr())?.[1], 10_000, 20, 'the first-start key'))!;
    const s = (await api(server.http, key, 'POST', '/v2/streams', { title: 'typo' })).json;
    const base = new URL(server.rtmp);
    const p = publish(`rtmp://${base.host}/live/${s.streamKey}/${s.streamKey}`, { seconds: 5 });
    await waitFor(() => server.stderr().includes('unknown application'), 15_000, 50, 'the refusal in the log');
    expect(await exited(p)).not.toBe(0);
    const logged = server.stderr().split('\n').filter((l) => l.startsWith('{'));
    const refusal = logged.find((l) => l.includes('unknown application'))!;
    expect(JSON.parse(refusal).reason).toMatch(/^publish refused: unknown application 'live\/sk_euw1_…REDACTED/);
    const random = s.streamKey.slice('sk_euw1_'.length);
    for (const l of logged) expect(l).not.toContain(random.slice(0, 8));
  });
});
