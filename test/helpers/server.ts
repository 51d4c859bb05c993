/**
 * Starts a real Skylark for tests: in-process (`startInProcess`, every `/v2` JSON answer checked
 * against the OpenAPI document) or as the CLI child process (`startCli`), on free ports and a fresh
 * temporary data dir.
 *
 * Logs: with `SKYLARK_TEST_LOG_DIR` set, every test server logs at `debug` level into its own file
 * there (`<test file>-<pid>-<n>-inprocess|cli.log`), which CI scans for secrets
 * (scripts/scan-secrets.mjs); unset, in-process servers log errors to stderr and CLI servers log
 * as their environment says, into `stderr()`.
 */
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, statfsSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import { loadConfig } from '../../src/base/config.js';
import { expect } from 'vitest';
import { createLogger, type Logger } from '../../src/base/logger.js';
import { startServer, type RunningServer } from '../../src/main.js';
import { OpenApiChecker } from './platform.js';

export const repoRoot = path.resolve(import.meta.dirname, '..', '..');

/**
 * Threads serving HTTP in test servers (`SKYLARK_HTTP_THREADS`): 1 unless
 * `SKYLARK_TEST_HTTP_THREADS` says otherwise (`npm run test:threads` runs the HLS, listening,
 * listener and token suites with 2). A test's own `SKYLARK_HTTP_THREADS` wins.
 */
export const testHttpThreads = process.env.SKYLARK_TEST_HTTP_THREADS || '1';
const cli = path.join(repoRoot, 'bin', 'skylark.js');

/** The directory test servers write their debug logs to (CI sets it), or null. */
export const testLogDir: string | null = process.env.SKYLARK_TEST_LOG_DIR || null;
let logFiles = 0;

/** A log file under SKYLARK_TEST_LOG_DIR named after the running test file; null when unset. Writes after close() are dropped. */
export function openTestLogFile(kind: string): { path: string; write(text: string): void; close(): void } | null {
  if (!testLogDir) return null;
  mkdirSync(testLogDir, { recursive: true });
  let testPath: string | undefined;
  try {
    testPath = expect.getState().testPath;
  } catch {
    testPath = undefined;
  }
  const base = testPath ? path.basename(testPath).replace(/\.test\.ts$/, '') : 'test';
  const file = path.join(testLogDir, `${base}-${process.pid}-${++logFiles}-${kind}.log`);
  let fd: number | null = openSync(file, 'a');
  return {
    path: file,
    write: (text) => {
      if (fd !== null) writeSync(fd, text);
    },
    close: () => {
      if (fd !== null) closeSync(fd);
      fd = null;
    },
  };
}

/**
 * The logger of a test server: with SKYLARK_TEST_LOG_DIR, every line from `debug` up into a file
 * there; else `error` lines on stderr. `close()` ends the file (later lines are dropped).
 */
export function testLogger(kind = 'inprocess'): { log: Logger; close(): void } {
  const file = openTestLogFile(kind);
  if (!file) return { log: createLogger('error'), close: () => {} };
  return { log: createLogger('debug', 'skylark', (line) => file.write(line)), close: () => file.close() };
}

/** A fresh temporary directory, removed by the returned cleanup. */
export function tempDir(prefix = 'skylark-test-'): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

export interface TestServer {
  server: RunningServer;
  http: string;
  dataDir: string;
  /** A paid account's keys. */
  secretKey: string;
  publishableKey: string;
  accountId: string;
  /**
   * Validates every `/v2` JSON answer of this server against its own OpenAPI document (ajv
   * 2020-12). A non-conforming answer fails the test that was running (the `afterEach` hook of
   * test/helpers/openapi-setup.ts, a vitest `setupFiles` entry), and `close()` throws with whatever
   * was not reported yet.
   */
  checker: OpenApiChecker;
  /** Stops the server and removes its data dir. @throws Error listing answers that did not conform to the OpenAPI document */
  close(): Promise<void>;
}

/** Starts Skylark in this process on free ports with one paid account; its answers are checked against the OpenAPI document. */
export async function startInProcess(env: Record<string, string> = {}): Promise<TestServer> {
  const { dir, cleanup } = tempDir();
  const config = loadConfig({ SKYLARK_HTTP_PORT: '0', SKYLARK_RTMP_PORT: '0', SKYLARK_ICECAST_PORT: '0', SKYLARK_DATA_DIR: dir, SKYLARK_LOG_LEVEL: 'error', SKYLARK_HTTP_THREADS: testHttpThreads, ...env });
  const logs = testLogger();
  const server = await startServer(config, logs.log);
  const http = `http://127.0.0.1:${server.httpPort}`;
  const docRes = await fetch(`${http}/v2/openapi.json`);
  if (docRes.status !== 200) throw new Error(`GET /v2/openapi.json answered ${docRes.status}`);
  const checker = new OpenApiChecker((await docRes.json()) as ConstructorParameters<typeof OpenApiChecker>[0]);
  checker.attach(server, http);
  const created = await server.accounts.create({ name: 'Test', plan: 'paid', region: 'eu-west-1' });
  return {
    server,
    http,
    dataDir: dir,
    secretKey: created.secretKey,
    publishableKey: created.publishableKey,
    accountId: created.account.id,
    checker,
    async close() {
      await server.close();
      logs.close();
      cleanup();
      checker.detach();
      const left = checker.takeNew();
      if (left.length) throw new Error(`answers of ${http} that do not conform to the OpenAPI document:\n${left.join('\n')}`);
    },
  };
}

/** Runs the CLI (`node bin/skylark.js …`) to completion; resolves to stdout. */
export async function runCli(args: string[], env: Record<string, string> = {}): Promise<string> {
  const { stdout } = await promisify(execFile)(process.execPath, [cli, ...args], { env: { ...process.env, ...env } });
  return stdout;
}

export interface CliServer {
  child: ChildProcess;
  http: string;
  rtmp: string;
  /** The Icecast port's URL (http://host:port). */
  icecast: string;
  stderr: () => string;
  stop(): Promise<void>;
}

/**
 * Starts `skylark serve` as a child process; resolves when it printed its listening line. With
 * SKYLARK_TEST_LOG_DIR, the child logs at `debug` (unless `env` sets SKYLARK_LOG_LEVEL) and its
 * stderr also goes to a file there, except the first-start `secretKey:`/`publishableKey:` lines
 * (printed once by design, docs/behaviour.md §1).
 */
export async function startCli(dataDir: string, env: Record<string, string> = {}): Promise<CliServer> {
  const file = openTestLogFile('cli');
  const child = spawn(process.execPath, [cli, 'serve'], {
    env: { ...process.env, SKYLARK_HTTP_PORT: '0', SKYLARK_RTMP_PORT: '0', SKYLARK_ICECAST_PORT: '0', SKYLARK_DATA_DIR: dataDir, SKYLARK_HTTP_THREADS: testHttpThreads, ...(file ? { SKYLARK_LOG_LEVEL: 'debug' } : {}), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  let partial = '';
  child.stderr!.on('data', (d: Buffer) => {
    err += d;
    if (!file) return;
    const lines = (partial + d.toString()).split('\n');
    partial = lines.pop()!;
    for (const l of lines) if (!FIRST_START_KEY_LINE.test(l)) file.write(l + '\n');
  });
  child.once('close', () => {
    // Exited and its stdio drained.
    if (partial && !FIRST_START_KEY_LINE.test(partial)) file?.write(partial);
    file?.close();
  });
  const line = await new Promise<string>((resolve, reject) => {
    const rl = createInterface({ input: child.stdout! });
    rl.once('line', resolve);
    child.once('exit', (code) => reject(new Error(`serve exited with ${code}: ${err}`)));
  });
  const listening = JSON.parse(line) as { event: string; http: string; rtmp: string; icecast: string };
  return {
    child,
    http: listening.http,
    rtmp: listening.rtmp,
    icecast: listening.icecast,
    stderr: () => err,
    stop: () =>
      new Promise((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

/** The lines of the first-start message that show the default account's keys. */
const FIRST_START_KEY_LINE = /^(secretKey|publishableKey): /;

/** fetch with a bearer key and JSON body. */
export async function api(base: string, key: string | null, method: string, p: string, body?: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${base}${p}`, {
    method,
    headers: { ...(key ? { Authorization: `Bearer ${key}` } : {}), ...(body !== undefined ? { 'Content-Type': 'application/json' } : {}), ...headers },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json: any = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = null;
  }
  return { status: res.status, headers: res.headers, json, text };
}

export { waitFor, waitSteady } from './wait.js';

/** A free TCP port on 127.0.0.1 (bound, then released: another process could take it in between). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
  });
}

/** Writes `file` (appending) until the volume has `leave` bytes free, or to its last byte. */
export function fillVolume(file: string, leave = 0): void {
  const fd = openSync(file, 'a');
  if (leave > 0) {
    const s = statfsSync(path.dirname(file));
    const n = s.bavail * s.bsize - leave;
    const block = Buffer.alloc(1024 * 1024, 1);
    for (let done = 0; done < n; done += block.length) writeSync(fd, block, 0, Math.min(block.length, n - done));
    closeSync(fd);
    return;
  }
  const block = Buffer.alloc(64 * 1024, 1);
  try {
    for (;;) writeSync(fd, block);
  } catch {
    // ENOSPC
  }
  try {
    for (;;) writeSync(fd, block.subarray(0, 512));
  } catch {
    // ENOSPC: full to the block
  }
  closeSync(fd);
}
