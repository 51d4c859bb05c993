/**
 * `skylark edge-config` as printed, run by Debian's nginx in front of a real server
 * (docs/edges.md):
 * - in a fresh, empty folder the printed config passes `nginx -t -c FILE` with no manual mkdir:
 *   edge-config creates the folders it names (cache dir, cache, temp paths, the access log's
 *   folder); with `--no-mkdir` it creates nothing;
 * - the access log file (`--access-log`) never holds a listener token or a session id, while it
 *   keeps the path and the `_HLS_msn`/`_HLS_part` of blocking reloads;
 * - the lines the edge sends to the origin's edge log receiver carry the origin's edge-log secret
 *   (edge-config run with the origin's `--data-dir`): the receiver reads them as signed.
 * Skipped, with a message, when nginx is not installed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { api, freePort, runCli, startInProcess, tempDir, waitFor, type TestServer } from '../../helpers/server.js';
import { nginxBinary } from '../../../bench/lib/nginx-edges.js';

const nginx = nginxBinary();
if (!nginx) process.stderr.write('edge-config-nginx.test.ts: nginx is not installed (apt-get install -y nginx): skipped\n');

let t: TestServer;
const dirs: Array<() => void> = [];

/** A fresh folder nginx's workers (nobody, when started as root) can reach. */
function folder(): string {
  const d = tempDir('skylark-edge-run-');
  dirs.push(d.cleanup);
  chmodSync(d.dir, 0o755);
  return d.dir;
}


beforeAll(async () => {
  if (!nginx) return;
  t = await startInProcess({ SKYLARK_TRUSTED_PROXIES: '127.0.0.1/32', SKYLARK_EDGE_LOG_HOST: '127.0.0.1', SKYLARK_EDGE_LOG_PORT: '0' });
}, 30_000);
afterAll(async () => {
  await t?.close();
  for (const c of dirs) c();
});

describe.skipIf(!nginx)('skylark edge-config run by nginx as printed', () => {
  it('creates the folders it names, so nginx -t passes in a fresh empty folder; --no-mkdir creates nothing', async () => {
    const root = folder();
    const cacheDir = path.join(root, 'new', 'edge');
    const accessLog = path.join(root, 'logs', 'access.log');
    const args = ['edge-config', '--origin', t.http, '--listen', '127.0.0.1:1', '--cache-dir', cacheDir, '--access-log', accessLog, '--log-to', `127.0.0.1:${t.server.edgeLogPort}`, '--data-dir', t.dataDir];

    const untouched = path.join(root, 'untouched');
    const printed = await runCli([...args.map((a) => (a === cacheDir ? untouched : a)), '--no-mkdir']);
    expect(printed).toContain('--no-mkdir: then mkdir -p them');
    expect(existsSync(untouched)).toBe(false);

    const conf = await runCli(args);
    for (const d of ['', 'cache', 'temp-body', 'temp-proxy', 'temp-fastcgi', 'temp-uwsgi', 'temp-scgi']) expect(existsSync(path.join(cacheDir, d)), d).toBe(true);
    expect(existsSync(path.dirname(accessLog))).toBe(true);
    const file = path.join(root, 'nginx.conf');
    writeFileSync(file, conf);
    const r = spawnSync(nginx!, ['-t', '-c', file], { encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/test is successful/);
  });

  it('writes no listener token or session id into the access log, and signs the lines it sends to the origin', async () => {
    const root = folder();
    const port = await freePort();
    const accessLog = path.join(root, 'access.log');
    const conf = await runCli(['edge-config', '--origin', t.http, '--listen', `127.0.0.1:${port}`, '--cache-dir', path.join(root, 'edge'), '--access-log', accessLog, '--log-to', `127.0.0.1:${t.server.edgeLogPort}`, '--data-dir', t.dataDir]);
    const file = path.join(root, 'nginx.conf');
    writeFileSync(file, conf);
    const child: ChildProcess = spawn(nginx!, ['-c', file, '-g', 'daemon off;'], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr!.on('data', (d) => (stderr += d));
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    try {
      const edge = `http://127.0.0.1:${port}`;
      await waitFor(async () => {
        if (child.exitCode !== null) throw new Error(`nginx exited: ${stderr}`);
        return (await fetch(`${edge}/v2/openapi.json`).catch(() => null))?.status === 200;
      }, 10_000, 50, 'the edge to answer');

      const tok = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Members', playback: 'token', latencyMode: 'low' })).json;
      const pub = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Public', latencyMode: 'low' })).json;
      const token = (await api(t.http, t.secretKey, 'POST', `/v2/streams/${tok.id}/listener_tokens`)).json.token as string;
      const sid = 'Sid0123456789abcdefSECRET';
      const stats0 = t.server.edgeLog!.stats();
      const asked = [
        `/hls/${tok.id}/index.m3u8?token=${token}`,
        `/hls/${tok.id}/a128/index.m3u8?token=${token}&_HLS_msn=5&_HLS_part=0`,
        `/hls/${tok.id}/a128/3.m4s?token=${token}`,
        `/hls/${pub.id}/a128/index.m3u8?sid=${sid}&_HLS_msn=7&_HLS_part=1`,
        `/hls/${pub.id}/a128/index.m3u8?_HLS_msn=8&sid=${sid}`,
        `/hls/${pub.id}/index.m3u8?sid=${sid}&token=${token}`,
      ];
      for (const p of asked) await (await fetch(edge + p)).arrayBuffer();
      // Every request is in the access log (nginx writes a line when it answers).
      await waitFor(() => readFileSync(accessLog, 'utf8').trim().split('\n').length >= asked.length, 5000, 50, 'the access log lines');
      const log = readFileSync(accessLog, 'utf8');
      expect(log).not.toContain(token);
      expect(log).not.toContain(token.split('.')[2]!); // not even the signature alone
      expect(log).not.toContain(sid);
      expect(log).not.toMatch(/token=|sid=/);
      // What an operator needs stays: the path and the blocking-reload directives.
      expect(log).toContain(`"GET /hls/${tok.id}/a128/index.m3u8?_HLS_msn=5&_HLS_part=0 HTTP/1.1"`);
      expect(log).toContain(`"GET /hls/${pub.id}/a128/index.m3u8?_HLS_msn=7&_HLS_part=1 HTTP/1.1"`);
      expect(log).toContain(`"GET /hls/${tok.id}/a128/3.m4s HTTP/1.1"`);
      expect(log).toContain(`"GET /hls/${pub.id}/index.m3u8 HTTP/1.1"`);

      // The media playlist lines reached the origin's receiver with its secret: read as signed
      // (then ignored: the streams are not live), none refused as unsigned.
      await waitFor(() => t.server.edgeLog!.stats().ignored - stats0.ignored >= 2, 5000, 50, 'the edge log lines');
      expect(t.server.edgeLog!.stats().unsigned).toBe(stats0.unsigned);
    } finally {
      child.kill('SIGTERM');
      await exited;
    }
  });
});
