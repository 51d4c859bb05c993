/**
 * Stopping the node (docs/behaviour.md §13 `shutdownTimeoutMs`, `SKYLARK_SHUTDOWN_TIMEOUT_MS`):
 * - `HttpServer.close()` closes every open connection at once, idle keep-alive ones and held
 *   requests alike (closing the listen socket alone left them on the event loop, and the process
 *   never exited);
 * - `RunningServer.close()` with a live publisher ends the ABR ladder's FFmpeg codec process
 *   (the RTMP listener closes its connections without telling the live service);
 * - `skylark serve` (the CLI child process) on SIGTERM, while it holds keep-alive HTTP
 *   connections, a blocking LL-HLS playlist reload and an RTMP publisher, closes them all and
 *   exits 0 within the deadline;
 * - a second signal during the stop exits at once with 128 + its number.
 *
 * The CLI runs the compiled code (bin/skylark.js → dist/): run `npx tsc -p tsconfig.build.json` first.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { HttpServer } from '../../../src/base/http/server.js';
import { LIMIT_DEFAULTS } from '../../../src/base/config.js';
import { api, repoRoot, startCli, startInProcess, tempDir, testLogger, waitFor, type CliServer } from '../../helpers/server.js';
import { exited, publish } from '../../helpers/publish.js';

/** A TCP connection that sent one HTTP/1.1 request (keep-alive) and records what it got and whether it closed. */
interface RawConnection {
  socket: net.Socket;
  received: () => string;
  closed: () => boolean;
}

/** Opens a connection to 127.0.0.1:`port` and sends `GET target` on it (HTTP/1.1: the connection stays open). */
function rawRequest(port: number, target: string): Promise<RawConnection> {
  return new Promise((resolve, reject) => {
    let data = '';
    let closed = false;
    const socket = net.connect(port, '127.0.0.1', () => {
      socket.write(`GET ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
      resolve({ socket, received: () => data, closed: () => closed });
    });
    socket.on('data', (d) => (data += d));
    socket.on('close', () => (closed = true));
    socket.on('error', reject);
  });
}

/** Pids of this process's children that are the ABR ladder's codec process (FFmpeg reading `pipe:0`). */
function ladderProcesses(): number[] {
  const pids: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid !== process.pid) continue;
      const argv = readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0');
      if (/ffmpeg/.test(path.basename(argv[0] ?? '')) && argv.includes('pipe:0')) pids.push(Number(name));
    } catch {
      // exited while being read
    }
  }
  return pids;
}

/** Whether `pid` still runs (a zombie does not count). */
function running(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

/** Resolves with the child's exit code, its signal name, or 'still running' after `ms`. */
function exitWithin(child: ChildProcess, ms: number): Promise<number | string> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve(child.exitCode ?? child.signalCode!);
    const timer = setTimeout(() => resolve('still running'), ms);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      resolve(code ?? signal!);
    });
  });
}

const publishers: ChildProcess[] = [];
afterEach(() => {
  for (const p of publishers.splice(0)) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
});

describe('HttpServer.close', () => {
  it('closes idle keep-alive connections and held requests at once, and stops listening', async () => {
    const logs = testLogger();
    const server = new HttpServer({ maxJsonBodyBytes: 1024, log: logs.log });
    let held = 0;
    server.api('get', '/ok', () => ({ status: 200, body: { ok: true } }));
    server.api('get', '/hold', () => {
      held++;
      return new Promise(() => {}); // never answered: the connection is held like a blocking playlist reload
    });
    server.finish();
    const port = await server.listen('127.0.0.1', 0);
    try {
      const idle = await rawRequest(port, '/ok');
      await waitFor(() => idle.received().includes('"ok":true'), 5000, 10, 'the first answer');
      const holding = await rawRequest(port, '/hold');
      await waitFor(() => held === 1, 5000, 10, 'the held request');
      expect(idle.closed()).toBe(false);
      expect(holding.closed()).toBe(false);

      server.close();
      // uWS's idle timeout (10 s) would close the idle one eventually, never the held one.
      await waitFor(() => idle.closed() && holding.closed(), 5000, 10, 'both connections closed');
      await expect(rawRequest(port, '/ok')).rejects.toMatchObject({ code: 'ECONNREFUSED' });
      server.close(); // idempotent
    } finally {
      server.close();
      logs.close();
    }
  });
});

describe('RunningServer.close with a live publisher', () => {
  it('ends the ABR ladder codec process', async () => {
    const t = await startInProcess();
    let closed = false;
    try {
      const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'ladder' })).json;
      publishers.push(publish(`${s.rtmpUrl}/${s.streamKey}`, { seconds: 60 }));
      await waitFor(async () => (await api(t.http, t.secretKey, 'GET', `/v2/streams/${s.id}`)).json.status === 'live', 20_000, 100, 'live');
      const ladder = await waitFor(() => (ladderProcesses().length > 0 ? ladderProcesses() : null), 10_000, 50, 'the ladder codec process');
      await t.close();
      closed = true;
      // Its stdin ends: FFmpeg exits (killed after 2 s if it does not).
      await waitFor(() => ladder.every((pid) => !running(pid)), 10_000, 50, 'the codec process to exit');
    } finally {
      if (!closed) await t.close();
    }
  });
});

describe('skylark serve on SIGTERM', () => {
  const dirs: Array<ReturnType<typeof tempDir>> = [];
  let server: CliServer | undefined;

  beforeAll(() => {
    if (!existsSync(path.join(repoRoot, 'dist', 'cli', 'main.js'))) {
      throw new Error('dist/ is missing: run `npx tsc -p tsconfig.build.json` before this test');
    }
  });
  afterEach(async () => {
    if (server && server.child.exitCode === null && server.child.signalCode === null) server.child.kill('SIGKILL');
    server = undefined;
  });
  afterAll(() => {
    for (const d of dirs) d.cleanup();
  });

  /** A CLI server with a live stream published by FFmpeg; resolves with what the test needs. */
  async function liveServer() {
    const tmp = tempDir('skylark-stop-');
    dirs.push(tmp);
    const srv = await startCli(tmp.dir);
    server = srv;
    const key = await waitFor(() => /^secretKey: (svc_sk_\w+)$/m.exec(srv.stderr())?.[1], 10_000, 20, 'the first-start key');
    const s = (await api(srv.http, key, 'POST', '/v2/streams', { title: 'stop me', latencyMode: 'low' })).json;
    const publisher = publish(`${s.rtmpUrl}/${s.streamKey}`, { seconds: 60 });
    publishers.push(publisher);
    await waitFor(async () => (await api(srv.http, key, 'GET', `/v2/streams/${s.id}`)).json.status === 'live', 20_000, 100, 'live');
    return { srv, key, stream: s as { id: string }, publisher };
  }

  it('closes keep-alive connections, a blocking LL-HLS reload and the publisher, then exits 0 within the deadline', async () => {
    const { srv, stream, publisher } = await liveServer();
    const port = Number(new URL(srv.http).port);

    // Keep-alive connections: node's agent keeps its sockets; one raw connection sits idle.
    const agent = new http.Agent({ keepAlive: true });
    const get = (url: string) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        http.get(url, { agent }, (res) => {
          let body = '';
          res.on('data', (d) => (body += d));
          res.on('end', () => resolve({ status: res.statusCode!, body }));
        }).on('error', reject);
      });
    const master = await waitFor(async () => {
      const r = await get(`${srv.http}/hls/${stream.id}/index.m3u8`);
      return r.status === 200 ? r.body : null;
    }, 10_000, 100, 'the multivariant playlist');
    const media = new URL(master.split('\n').find((l) => l && !l.startsWith('#'))!, `${srv.http}/hls/${stream.id}/`).toString();
    const hint = await waitFor(async () => /#EXT-X-PRELOAD-HINT:[^\n]*URI="(\d+)\.(\d+)\.m4s/.exec((await get(media)).body), 10_000, 100, 'a preload hint');
    const idle = await rawRequest(port, '/v2/openapi.json');
    await waitFor(() => idle.received().includes('"openapi"'), 5000, 10, 'the raw answer');

    // A blocking playlist reload for the segment after the one being made (two past the last listed,
    // the furthest a reload may ask for: docs/ll-hls.md): held by the server for seconds.
    let blocking: string | null = null;
    const reload = new URL(media);
    reload.searchParams.set('_HLS_msn', String(Number(hint[1]) + 1));
    const req = http.get(reload, { agent: new http.Agent({ keepAlive: true }) }, (res) => {
      blocking = `answered ${res.statusCode}`;
      res.resume();
    });
    req.on('error', (e) => (blocking = `closed (${e.message})`));
    await new Promise((r) => setTimeout(r, 300)); // A fixed wait on purpose: the reload is held, unanswered, when the signal comes.
    expect(blocking).toBeNull();

    srv.child.kill('SIGTERM');
    const code = await exitWithin(srv.child, LIMIT_DEFAULTS.shutdownTimeoutMs + 5000);
    expect(code, srv.stderr()).toBe(0);
    expect(srv.stderr()).toMatch(/"msg":"stopping","signal":"SIGTERM"/);
    expect(srv.stderr()).toMatch(/"msg":"stopped"/);
    await waitFor(() => idle.closed() && blocking !== null, 5000, 10, 'the connections closed');
    expect(await exited(publisher)).not.toBe(0); // its server went away
    agent.destroy();
  });

  it('exits at once with 128 + the signal number on a second signal', async () => {
    const { srv } = await liveServer();
    // Both at once: sent while the process is stopped (SIGSTOP), both are pending when it runs again
    // and reach its event loop together, so the second is seen while the stop the first started
    // (worker threads, codec processes) is under way — however the machine schedules the two sends.
    srv.child.kill('SIGSTOP');
    srv.child.kill('SIGTERM');
    srv.child.kill('SIGINT');
    srv.child.kill('SIGCONT');
    const code = await exitWithin(srv.child, LIMIT_DEFAULTS.shutdownTimeoutMs + 5000);
    expect([128 + 15, 128 + 2], srv.stderr()).toContain(code);
    expect(srv.stderr()).toMatch(/"msg":"second signal: exiting without finishing the stop"/);
    expect(srv.stderr()).not.toMatch(/"msg":"stopped"/);
  });
});
