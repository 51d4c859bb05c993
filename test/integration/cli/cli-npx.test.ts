/**
 * `npx skylark …` and `npm start` in the checkout after `npm ci` (docs/cli.md, docs/decisions.md "npx skylark"):
 * npm exec runs the command linked into node_modules/.bin at once, offline, without installing
 * the checkout into its npx cache (which copied it there and rebuilt the addon, and failed
 * offline); `serve` started that way logs the status of the HTTP front's hooks on the loaded
 * HTTP library binary (docs/http.md "HTTP/1.0"); `npm start` compiles only when dist/ is missing
 * or older than src/ (scripts/ensure-built.mjs), so a start after a build compiles nothing.
 *
 * Needs `npm ci` (or `npm install`) to have run: its `postinstall` makes the link; the CLI runs
 * the compiled code in dist/ (`npm ci` builds it).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { execFile, spawn } from 'node:child_process';
import { existsSync, readdirSync, realpathSync, statSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import { repoRoot, tempDir, waitFor } from '../../helpers/server.js';

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

/** An environment for npm with an empty cache of its own (so an npx install would show there). */
function npmEnv(): { env: NodeJS.ProcessEnv; cache: string } {
  const t = tempDir('skylark-npm-cache-');
  cleanups.push(t.cleanup);
  const env: NodeJS.ProcessEnv = { ...process.env, npm_config_cache: t.dir, npm_config_update_notifier: 'false', npm_config_fund: 'false' };
  return { env, cache: t.dir };
}

/**
 * Runs `npm` or `npx` with `args` in the checkout, in a process group of its own, until its stdout
 * says it listens; then SIGTERM to the group and resolves once it exited, to its stderr.
 */
async function serveUntilListening(command: string, args: string[], env: NodeJS.ProcessEnv): Promise<{ stderr: string; line: string }> {
  const child = spawn(command, args, { cwd: repoRoot, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  cleanups.push(() => {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      // already gone
    }
  });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout }).once('line', resolve);
    child.once('exit', (code) => reject(new Error(`${command} exited with ${code}: ${stderr}`)));
  });
  // The hooks are installed before the listening line is printed; their log line comes first.
  process.kill(-child.pid!, 'SIGTERM');
  await exited;
  await waitFor(() => stderr.includes('"msg":"stopped"'), 10_000, 50, 'the stopped line');
  return { stderr, line };
}

describe('npx skylark in the checkout', () => {
  it('links the command into node_modules/.bin (postinstall)', () => {
    const link = path.join(repoRoot, 'node_modules', '.bin', 'skylark');
    expect(existsSync(link)).toBe(true);
    expect(realpathSync(link)).toBe(realpathSync(path.join(repoRoot, 'bin', 'skylark.js')));
  });

  it('`npx --offline --no skylark help` runs the local command: exit 0, no install into the npx cache', async () => {
    const { env, cache } = npmEnv();
    const { stdout } = await promisify(execFile)('npx', ['--offline', '--no', 'skylark', 'help'], { cwd: repoRoot, env });
    expect(stdout).toContain('usage: skylark <command>');
    // npm exec installs a package it has to fetch (or the checkout itself) under <cache>/_npx/<hash>.
    expect(readdirSync(cache)).not.toContain('_npx');
  });

  it('`npx --offline --no skylark serve` logs the HTTP front hooks status, then stops on SIGTERM', async () => {
    const { env, cache } = npmEnv();
    const data = tempDir();
    cleanups.push(data.cleanup);
    const args = ['--offline', '--no', 'skylark', 'serve', '--http-port', '0', '--rtmp-port', '0', '--icecast-port', '0', '--data-dir', data.dir];
    const { stderr, line } = await serveUntilListening('npx', args, { ...env, SKYLARK_LOG_LEVEL: 'info', SKYLARK_HTTP_THREADS: '1' });
    expect(JSON.parse(line)).toMatchObject({ event: 'listening' });
    const statusLine = stderr.split('\n').find((l) => l.includes('"msg":"HTTP front hooks installed"'));
    expect(statusLine, stderr).toBeDefined();
    const status = JSON.parse(statusLine!) as { installed: boolean; object: string; library: string; features: Record<string, boolean> };
    expect(status.installed).toBe(true);
    expect(status.object).toMatch(/\/uws_linux_[a-z0-9]+_\d+\.node$/);
    expect(existsSync(status.object)).toBe(true);
    expect(status.features).toMatchObject({ http10: true, listenSendBuffer: true });
    expect(status.library).toMatch(/uWebSockets\.js v20\./);
    expect(readdirSync(cache)).not.toContain('_npx');
  });

  it('`npm start` after a build starts the built CLI without compiling', async () => {
    const { env } = npmEnv();
    await promisify(execFile)(process.execPath, [path.join(repoRoot, 'scripts', 'ensure-built.mjs')], { cwd: repoRoot }); // a tree edited since its build
    const main = path.join(repoRoot, 'dist', 'cli', 'main.js');
    const before = statSync(main).mtimeMs;
    const data = tempDir();
    cleanups.push(data.cleanup);
    const { stderr, line } = await serveUntilListening('npm', ['start', '--silent'], {
      ...env,
      SKYLARK_HTTP_PORT: '0',
      SKYLARK_RTMP_PORT: '0',
      SKYLARK_ICECAST_PORT: '0',
      SKYLARK_DATA_DIR: data.dir,
      SKYLARK_HTTP_THREADS: '1',
    });
    expect(JSON.parse(line)).toMatchObject({ event: 'listening' });
    expect(stderr).not.toContain('compiling the TypeScript');
    expect(statSync(main).mtimeMs).toBe(before);
  });
});
