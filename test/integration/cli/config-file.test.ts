/**
 * The configuration file (docs/configuration.md "Configuration file"), through the real CLI
 * (`node bin/skylark.js`, the compiled code in dist/: run `npm run build:ts` first):
 * - `serve --config FILE` (or SKYLARK_CONFIG) takes its settings (the HTTP port it listens on);
 * - a flag, and an environment variable, win over the file;
 * - an unknown key, a bad value (even one a flag overrides) and malformed TOML exit 2 with
 *   `FILE:LINE` and the key on stderr, and nothing starts;
 * - the other commands read the file's data dir;
 * - docs/skylark.example.toml loads.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { freePort, repoRoot, tempDir } from '../../helpers/server.js';

const cli = path.join(repoRoot, 'bin', 'skylark.js');
const dirs: Array<() => void> = [];
afterAll(() => dirs.forEach((c) => c()));

/** The environment without any SKYLARK_* variable of the test run, plus `env`. */
function cleanEnv(env: Record<string, string>): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('SKYLARK_')) out[k] = v;
  return { ...out, ...env };
}

/** A fresh folder with a configuration file of `text`; resolves to their paths. */
function configFile(text: string): { dir: string; file: string } {
  const d = tempDir('skylark-config-file-');
  dirs.push(d.cleanup);
  const file = path.join(d.dir, 'skylark.toml');
  writeFileSync(file, text);
  return { dir: d.dir, file };
}


/**
 * Runs the CLI with `args`; for `serve`, resolves with its listening line once printed (then stops
 * it with SIGTERM), else with its exit code, stdout and stderr.
 */
function run(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string; listening?: { http: string } }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [cli, ...args], { env: cleanEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let listening: { http: string } | undefined;
    child.stderr.on('data', (d) => (stderr += d));
    createInterface({ input: child.stdout }).on('line', (line) => {
      stdout += line + '\n';
      if (line.includes('"event":"listening"')) {
        listening = JSON.parse(line) as { http: string };
        child.kill('SIGTERM');
      }
    });
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr, listening }));
  });
}

/** A file's lines that let `serve` start beside other tests: free ports, one HTTP thread, its own data dir. */
const quiet = (dir: string) => `rtmp-port = 0\nicecast-port = 0\nhttp-threads = 1\ndata-dir = "${path.join(dir, 'data')}"\n`;

describe('skylark serve --config FILE', () => {
  it('takes the settings of the file (the HTTP port), also named by SKYLARK_CONFIG', async () => {
    const port = await freePort();
    const { dir, file } = configFile('');
    writeFileSync(file, `# a comment\nhttp-port = ${port}\n${quiet(dir)}`);
    const r = await run(['serve', '--config', file]);
    expect(r.listening?.http, r.stderr).toBe(`http://127.0.0.1:${port}`);
    expect(r.code).toBe(0);
    expect(existsSync(path.join(dir, 'data'))).toBe(true);

    const viaEnv = await run(['serve'], { SKYLARK_CONFIG: file });
    expect(viaEnv.listening?.http, viaEnv.stderr).toBe(`http://127.0.0.1:${port}`);
  }, 60_000);

  it('lets a flag, and an environment variable, win over the file', async () => {
    const [inFile, inFlag, inEnv] = [await freePort(), await freePort(), await freePort()];
    const { dir, file } = configFile('');
    writeFileSync(file, `http-port = ${inFile}\n${quiet(dir)}`);
    const flag = await run(['serve', '--config', file, '--http-port', String(inFlag)]);
    expect(flag.listening?.http, flag.stderr).toBe(`http://127.0.0.1:${inFlag}`);
    const env = await run(['serve', '--config', file], { SKYLARK_HTTP_PORT: String(inEnv) });
    expect(env.listening?.http, env.stderr).toBe(`http://127.0.0.1:${inEnv}`);
    const both = await run(['serve', '--config', file, '--http-port', String(inFlag)], { SKYLARK_HTTP_PORT: String(inEnv) });
    expect(both.listening?.http, both.stderr).toBe(`http://127.0.0.1:${inFlag}`);
  }, 60_000);

  it('refuses an unknown key with exit 2, naming the file, its line and the key', async () => {
    // The multi-line string holds the key's text: not where it is defined.
    const { dir, file } = configFile('');
    writeFileSync(file, `${quiet(dir)}trusted-proxies = """\nhtp-port = 1\n"""\n\nhtp-port = 9090\n`);
    const r = await run(['serve', '--config', file]);
    expect(r.code).toBe(2);
    expect(r.listening).toBeUndefined();
    expect(r.stderr).toContain(`${file}:9: unknown key 'htp-port' (did you mean http-port?)`);
    expect(existsSync(path.join(dir, 'data'))).toBe(false);

    const table = configFile(`http-port = 8080\n\n[limits]\nhttp-max-held = 10\n`);
    const t = await run(['serve', '--config', table.file]);
    expect(t.code).toBe(2);
    expect(t.stderr).toContain(`${table.file}:3: unknown key 'limits'`);
  });

  it('refuses a bad value with exit 2, naming the file, its line and the key, even when a flag overrides it', async () => {
    const { file } = configFile(`http-port = 8080\nlog-level = "loud"\nhttp-max-held = 0\n`);
    const r = await run(['serve', '--config', file, '--log-level', 'info']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(new RegExp(`^skylark: ${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:2: invalid log-level: `));

    const limit = configFile(`http-max-held = 0\n`);
    const l = await run(['serve', '--config', limit.file]);
    expect(l.code).toBe(2);
    expect(l.stderr).toContain(`${limit.file}:1: invalid http-max-held: must be at least 1`);

    const type = configFile(`\nhttp-port = [8080]\n`);
    const ty = await run(['serve', '--config', type.file]);
    expect(ty.code).toBe(2);
    expect(ty.stderr).toContain(`${type.file}:2: invalid http-port: takes one value, not an array`);
  });

  it('refuses malformed TOML with exit 2, naming the file and the line', async () => {
    const { file } = configFile(`http-port = 8080\nrtmp-port = 1935\nbase-url = "https://radio.example.com/v2\n`);
    const r = await run(['serve', '--config', file]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(new RegExp(`^skylark: ${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:3:\\d+: not valid TOML: `));

    const missing = await run(['serve', '--config', path.join(path.dirname(file), 'nope.toml')]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('nope.toml: cannot read the configuration file (ENOENT)');
  });

  it('gives the other commands the data dir of the file', async () => {
    const { dir, file } = configFile('');
    writeFileSync(file, `data-dir = "${path.join(dir, 'data')}"\n`);
    const created = await run(['accounts', 'create', '--name', 'From the file', '--json'], { SKYLARK_CONFIG: file });
    expect(created.code, created.stderr).toBe(0);
    const account = (JSON.parse(created.stdout) as { account: { id: string } }).account.id;
    expect(existsSync(path.join(dir, 'data'))).toBe(true);
    const keys = await run(['keys', 'list', '--account', account, '--config', file, '--json']);
    expect(keys.code, keys.stderr).toBe(0);
    expect((JSON.parse(keys.stdout) as { data: unknown[] }).data.length).toBeGreaterThan(0);
  });

  it('loads docs/skylark.example.toml', async () => {
    const d = tempDir('skylark-config-example-');
    dirs.push(d.cleanup);
    const example = path.join(repoRoot, 'docs', 'skylark.example.toml');
    // Its own ports and data dir are a deployed node's: free ones and a temp dir here.
    const r = await run(['serve', '--config', example, '--http-port', '0', '--rtmp-port', '0', '--icecast-port', '0', '--edge-log-port', '0', '--data-dir', d.dir, '--http-threads', '1']);
    expect(r.listening?.http, r.stderr).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(r.code).toBe(0);
  }, 60_000);
});
