/**
 * `skylark systemd-unit` (docs/deploy.md "The service"), through the real CLI: the printed unit
 * passes `systemd-analyze verify` with no warning, runs `serve` by absolute paths of node and
 * bin/skylark.js (the command line it carries starts the node), restarts on failure, keeps the
 * data dir as its only writable path, and takes its open-file limit, capabilities and data dir
 * from the configuration file. `systemd-analyze security --offline` rates its exposure.
 *
 * `systemd-analyze` (Debian package systemd, which .ci/run installs) works without systemd
 * running; the test is skipped, with a message, without it.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { execFile, spawn, spawnSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import { repoRoot, runCli, tempDir } from '../../helpers/server.js';

const analyze = spawnSync('systemd-analyze', ['--version']).status === 0;
if (!analyze) process.stderr.write('systemd-unit.test.ts: systemd-analyze is not installed (apt-get install -y systemd): skipped\n');

const dirs: Array<() => void> = [];
afterAll(() => dirs.forEach((c) => c()));

function folder(): string {
  const d = tempDir('skylark-systemd-unit-');
  dirs.push(d.cleanup);
  return d.dir;
}

/** `systemd-analyze verify` of `unit` (written as skylark.service in `dir`): its exit code and everything it printed. */
function verify(dir: string, unit: string): { status: number | null; output: string } {
  const file = path.join(dir, 'skylark.service');
  writeFileSync(file, unit);
  const r = spawnSync('systemd-analyze', ['verify', '--man=no', file], { encoding: 'utf8' });
  return { status: r.status, output: `${r.stdout}${r.stderr}` };
}

/** The value of `key=` in the unit (the last one). */
const setting = (unit: string, key: string) => [...unit.matchAll(new RegExp(`^${key}=(.*)$`, 'gm'))].pop()?.[1];

/** Exit code and stderr of a CLI run expected to fail. */
async function fails(args: string[]): Promise<{ code: number; stderr: string }> {
  try {
    await promisify(execFile)(process.execPath, [path.join(repoRoot, 'bin', 'skylark.js'), ...args]);
  } catch (e) {
    const err = e as { code?: number; stderr?: string };
    return { code: err.code ?? -1, stderr: err.stderr ?? '' };
  }
  throw new Error(`expected ${args.join(' ')} to fail`);
}

describe.skipIf(!analyze)('skylark systemd-unit', () => {
  it('prints a unit systemd-analyze verify accepts: absolute node and bin/skylark.js, restart on failure, the data dir the only writable path', async () => {
    const dir = folder();
    const data = path.join(dir, 'data');
    const unit = await runCli(['systemd-unit', '--user', 'skylark', '--data-dir', data]);
    const v = verify(dir, unit);
    expect(v.status, v.output).toBe(0);
    expect(v.output).toBe('');

    expect(setting(unit, 'ExecStart')).toBe(`${process.execPath} ${path.join(repoRoot, 'bin', 'skylark.js')} serve --data-dir ${data}`);
    expect(path.isAbsolute(process.execPath)).toBe(true);
    expect(setting(unit, 'User')).toBe('skylark');
    expect(setting(unit, 'Restart')).toBe('on-failure');
    expect(setting(unit, 'RestartPreventExitStatus')).toBe('2');
    expect(setting(unit, 'ProtectSystem')).toBe('strict');
    expect(setting(unit, 'ReadWritePaths')).toBe(data);
    expect(setting(unit, 'NoNewPrivileges')).toBe('yes');
    expect(setting(unit, 'KillMode')).toBe('mixed');
    // The default caps: 2 × (50,000 held + 20,000 listen + 1,000 RTMP + 200 Icecast + 200 WHEP) → 2^18.
    expect(setting(unit, 'LimitNOFILE')).toBe('262144');
    // Default ports (8080, 1935, 8000): no capability.
    expect(setting(unit, 'CapabilityBoundingSet')).toBe('');
    expect(setting(unit, 'AmbientCapabilities')).toBeUndefined();
    expect(unit).not.toMatch(/^MemoryDenyWriteExecute=/m); // V8 writes executable code

    // systemd's own rating of the sandbox (0 = the most, 10 = none): "OK" is under 4.
    const sec = spawnSync('systemd-analyze', ['security', '--offline=yes', '--no-pager', path.join(dir, 'skylark.service')], { encoding: 'utf8' });
    const exposure = Number(/Overall exposure level for skylark\.service: ([\d.]+)/.exec(sec.stdout)?.[1]);
    expect(exposure, sec.stdout + sec.stderr).toBeLessThan(2.5);
  });

  it('takes the data dir, the open-file limit and the port capability from the configuration file', async () => {
    const dir = folder();
    const data = path.join(dir, 'from-file');
    const config = path.join(dir, 'skylark.toml');
    writeFileSync(config, `data-dir = "${data}"\nhttp-port = 80\nlisten-max-connections = 100000\n`);
    const unit = await runCli(['systemd-unit', '--config', config]);
    const v = verify(dir, unit);
    expect(v.status, v.output).toBe(0);
    expect(v.output).toBe('');
    expect(setting(unit, 'ExecStart')).toBe(`${process.execPath} ${path.join(repoRoot, 'bin', 'skylark.js')} serve --config ${config} --data-dir ${data}`);
    expect(setting(unit, 'ReadWritePaths')).toBe(data);
    expect(setting(unit, 'WorkingDirectory')).toBe(data);
    // 2 × (50,000 + 100,000 + 1,000 + 200 + 200) = 302,800 → 2^19.
    expect(setting(unit, 'LimitNOFILE')).toBe('524288');
    expect(setting(unit, 'CapabilityBoundingSet')).toBe('CAP_NET_BIND_SERVICE');
    expect(setting(unit, 'AmbientCapabilities')).toBe('CAP_NET_BIND_SERVICE');

    // --data-dir wins over the file.
    const flagged = await runCli(['systemd-unit', '--config', config, '--data-dir', path.join(dir, 'flag')]);
    expect(setting(flagged, 'ReadWritePaths')).toBe(path.join(dir, 'flag'));
  });

  it('carries a command line that starts the node', async () => {
    const dir = folder();
    const data = path.join(dir, 'data');
    const config = path.join(dir, 'skylark.toml');
    writeFileSync(config, 'http-port = 0\nrtmp-port = 0\nicecast-port = 0\nhttp-threads = 1\n');
    const unit = await runCli(['systemd-unit', '--config', config, '--data-dir', data]);
    const [bin, ...args] = setting(unit, 'ExecStart')!.split(' ');
    const env: NodeJS.ProcessEnv = {};
    for (const [k, val] of Object.entries(process.env)) if (!k.startsWith('SKYLARK_')) env[k] = val;
    const child = spawn(bin!, args, { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const line = await new Promise<string>((resolve, reject) => {
      createInterface({ input: child.stdout }).once('line', resolve);
      child.once('exit', (code) => reject(new Error(`serve exited with ${code}: ${stderr}`)));
    });
    expect(JSON.parse(line).event).toBe('listening');
    expect(existsSync(data)).toBe(true); // the unit's data dir, made by serve
    const code = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    expect(await code).toBe(0);
  }, 60_000);

  it('refuses a user name or a path a unit cannot carry, with exit 2', async () => {
    const user = await fails(['systemd-unit', '--user', 'root; rm']);
    expect(user.code).toBe(2);
    expect(user.stderr).toContain('--user must be a system user name');
    const spaced = await fails(['systemd-unit', '--data-dir', '/var/lib/sky lark']);
    expect(spaced.code).toBe(2);
    expect(spaced.stderr).toContain('--data-dir must be an absolute path');
  });
});
