/**
 * The `skylark` CLI (docs/behaviour.md §1, §9 "Keys CLI"): `accounts create`, `accounts set-login` and
 * `keys list|create|roll|revoke` with `--json`, bad flags, and the CLI working while a server runs
 * on the same data dir — the first-start default account gets a dashboard login from `set-login`
 * (password on stdin) and signs in to a running `serve`.
 *
 * The CLI runs the compiled code (bin/skylark.js → dist/). This test does not build: run
 * `npx tsc -p tsconfig.build.json` first (`npm test` does it through `npm run build`).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import { api, repoRoot, runCli, startCli, tempDir, testLogger, waitFor, type CliServer } from '../../helpers/server.js';
import { loadConfig } from '../../../src/base/config.js';
import { startServer, type RunningServer } from '../../../src/main.js';

/** Runs the CLI expecting failure; resolves to its exit code and stderr. */
async function runCliFail(args: string[]): Promise<{ code: number; stderr: string; stdout: string }> {
  try {
    const { stdout } = await promisify(execFile)(process.execPath, [path.join(repoRoot, 'bin', 'skylark.js'), ...args]);
    throw new Error(`expected failure, got success: ${stdout}`);
  } catch (e) {
    const err = e as { code?: number; stderr?: string; stdout?: string };
    if (typeof err.code !== 'number') throw e;
    return { code: err.code, stderr: err.stderr ?? '', stdout: err.stdout ?? '' };
  }
}

/** Runs the CLI with `stdin` written to its standard input; resolves to its exit code and output. */
function runCliWithInput(args: string[], stdin: string, env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(repoRoot, 'bin', 'skylark.js'), ...args], { env: { ...process.env, ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.on('error', () => {}); // the CLI may exit before reading (unknown account)
    child.stdin.end(stdin);
  });
}

/**
 * Signs in to the dashboard of `base` as a browser would (GET the form for its session cookie and
 * CSRF token, POST the credentials); resolves to the POST's status (303 signed in, 401 refused)
 * and the signed-in session's cookie.
 */
async function dashboardSignIn(base: string, email: string, password: string): Promise<{ status: number; cookie: string }> {
  const form = await fetch(`${base}/dashboard/login`);
  const cookie = (form.headers.get('set-cookie') ?? '').split(';')[0]!;
  const csrf = /name="csrf_token" value="([^"]+)"/.exec(await form.text())?.[1];
  if (!cookie || !csrf) throw new Error('the dashboard login form gave no session cookie or CSRF token');
  const res = await fetch(`${base}/dashboard/login`, {
    method: 'POST',
    redirect: 'manual',
    headers: { Cookie: cookie, 'Content-Type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ email, password, csrf_token: csrf, next: '/dashboard' }).toString(),
  });
  await res.arrayBuffer();
  return { status: res.status, cookie: (res.headers.get('set-cookie') ?? '').split(';')[0]! };
}

const tmp = tempDir('skylark-cli-');
const dir = tmp.dir;

beforeAll(() => {
  if (!existsSync(path.join(repoRoot, 'dist', 'cli', 'main.js'))) {
    throw new Error('dist/ is missing: run `npx tsc -p tsconfig.build.json` before this test');
  }
});
afterAll(() => tmp.cleanup());

describe('skylark accounts create', () => {
  it('--json prints the account and both keys', async () => {
    const out = JSON.parse(await runCli(['accounts', 'create', '--name', 'X', '--plan', 'paid', '--json', '--data-dir', dir]));
    expect(out.account).toMatchObject({ object: 'account', name: 'X', plan: 'paid', defaultRegion: 'eu-west-1', email: null });
    expect(out.account.id).toMatch(/^acct_[A-Za-z0-9]+$/);
    expect(out.account.createdAt).toMatch(/Z$/);
    expect(out.secretKey).toMatch(/^svc_sk_[A-Za-z0-9]{32}$/);
    expect(out.publishableKey).toMatch(/^svc_pk_[A-Za-z0-9]{32}$/);
    expect(Object.keys(out).sort()).toEqual(['account', 'publishableKey', 'secretKey']);
  });

  it('takes --region, --email and --password; SKYLARK_DATA_DIR works instead of --data-dir', async () => {
    const out = JSON.parse(
      await runCli(['accounts', 'create', '--name', 'APAC', '--plan', 'free', '--region', 'ap-southeast-1', '--email', 'Owner@Example.com', '--password', 'pw-123456', '--json'], {
        SKYLARK_DATA_DIR: dir,
      }),
    );
    expect(out.account).toMatchObject({ plan: 'free', defaultRegion: 'ap-southeast-1', email: 'owner@example.com' });
    expect(JSON.stringify(out)).not.toContain('pw-123456');
  });

  it('refuses a second account with the same owner email', async () => {
    const r = await runCliFail(['accounts', 'create', '--name', 'Dup', '--email', 'OWNER@example.com', '--password', 'x', '--json', '--data-dir', dir]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/already exists/);
  });

  it('without --json prints the keys as lines', async () => {
    const out = await runCli(['accounts', 'create', '--name', 'Plain', '--plan', 'free', '--data-dir', dir]);
    expect(out).toMatch(/^account acct_/m);
    expect(out).toMatch(/^secretKey: svc_sk_/m);
    expect(out).toMatch(/^publishableKey: svc_pk_/m);
  });

  it.each([
    [['accounts', 'create', '--plan', 'paid'], /--name/],
    [['accounts', 'create', '--name', 'X', '--plan', 'gold'], /--plan/],
    [['accounts', 'create', '--name', 'X', '--region', 'mars-1'], /--region/],
    [['accounts', 'create', '--name', 'X', '--email', 'a@b.c'], /--password/],
    [['accounts', 'create', '--name', 'X', '--bogus'], /bogus/],
    [['accounts', 'delete'], /unknown command/],
    [['frobnicate'], /unknown command/],
  ])('%j exits non-zero with a message', async (args, message) => {
    const r = await runCliFail([...args, '--data-dir', dir]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(message);
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });
});

describe('skylark keys', () => {
  let account: string;
  let secretKey: string;
  let publishableKey: string;

  beforeAll(async () => {
    const out = JSON.parse(await runCli(['accounts', 'create', '--name', 'Keys', '--plan', 'paid', '--json', '--data-dir', dir]));
    account = out.account.id;
    secretKey = out.secretKey;
    publishableKey = out.publishableKey;
  });

  const list = async () => JSON.parse(await runCli(['keys', 'list', '--account', account, '--json', '--data-dir', dir]));

  it('list --json shows the keys without their secrets', async () => {
    const l = await list();
    expect(l.object).toBe('list');
    expect(l.data).toHaveLength(2);
    for (const k of l.data) {
      expect(k.id).toMatch(/^key_/);
      expect(k.object).toBe('api_key');
      expect(k.revokedAt).toBeNull();
    }
    expect(l.data.map((k: { type: string }) => k.type).sort()).toEqual(['publishable', 'secret']);
    const sk = l.data.find((k: { type: string }) => k.type === 'secret');
    expect(sk.prefix).toBe('svc_sk_');
    expect(sk.last4).toBe(secretKey.slice(-4));
    const text = JSON.stringify(l);
    expect(text).not.toContain(secretKey);
    expect(text).not.toContain(publishableKey);
  });

  it('create --type secret|publishable --json prints the new key once', async () => {
    const pk = JSON.parse(await runCli(['keys', 'create', '--account', account, '--type', 'publishable', '--json', '--data-dir', dir]));
    expect(pk.id).toMatch(/^key_/);
    expect(pk.key).toMatch(/^svc_pk_[A-Za-z0-9]{32}$/);
    const sk = JSON.parse(await runCli(['keys', 'create', '--account', account, '--type', 'secret', '--json', '--data-dir', dir]));
    expect(sk.key).toMatch(/^svc_sk_[A-Za-z0-9]{32}$/);
    expect((await list()).data).toHaveLength(4);
  });

  it('roll --key --json prints the replacement and revokes the old key', async () => {
    const rolled = JSON.parse(await runCli(['keys', 'roll', '--key', secretKey, '--json', '--data-dir', dir]));
    expect(rolled.key).toMatch(/^svc_sk_[A-Za-z0-9]{32}$/);
    expect(rolled.key).not.toBe(secretKey);
    const l = await list();
    const old = l.data.find((k: { last4: string; type: string; revokedAt: string | null }) => k.type === 'secret' && k.last4 === secretKey.slice(-4) && k.revokedAt !== null);
    expect(old).toBeDefined();
    const again = await runCliFail(['keys', 'roll', '--key', secretKey, '--json', '--data-dir', dir]);
    expect(again.code).not.toBe(0);
    expect(again.stderr).toMatch(/no such active key/);
    secretKey = rolled.key;
  });

  it('revoke --key revokes (by key string or key id); a second revoke fails', async () => {
    const r = JSON.parse(await runCli(['keys', 'revoke', '--key', publishableKey, '--json', '--data-dir', dir]));
    expect(r).toEqual({ revoked: true });
    const again = await runCliFail(['keys', 'revoke', '--key', publishableKey, '--data-dir', dir]);
    expect(again.code).not.toBe(0);
    expect(again.stderr).toMatch(/no such active key/);
    const made = JSON.parse(await runCli(['keys', 'create', '--account', account, '--type', 'secret', '--json', '--data-dir', dir]));
    const byId = await runCli(['keys', 'revoke', '--key', made.id, '--data-dir', dir]);
    expect(byId.trim()).toBe('revoked');
    const l = await list();
    expect(l.data.find((k: { id: string }) => k.id === made.id).revokedAt).not.toBeNull();
  });

  it.each([
    [['keys', 'list'], /--account/],
    [['keys', 'create', '--account', 'acct_x', '--type', 'admin'], /--type/],
    [['keys', 'create', '--account', 'acct_nope', '--type', 'secret'], /no such account/],
    [['keys', 'roll'], /--key/],
    [['keys', 'roll', '--key', 'svc_sk_nope'], /no such active key/],
    [['keys', 'revoke'], /--key/],
    [['keys', 'list', '--account', 'acct_x', '--what'], /what/],
    [['keys', 'rotate'], /unknown command/],
  ])('%j exits non-zero with a message', async (args, message) => {
    const r = await runCliFail([...args, '--data-dir', dir]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(message);
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });
});

describe('the CLI while a server runs on the same data dir', () => {
  let server: RunningServer;
  const t = tempDir('skylark-cli-serve-');
  const logs = testLogger();

  beforeAll(async () => {
    const config = loadConfig({ SKYLARK_HTTP_PORT: '0', SKYLARK_RTMP_PORT: '0', SKYLARK_ICECAST_PORT: '0', SKYLARK_DATA_DIR: t.dir, SKYLARK_LOG_LEVEL: 'error' });
    server = await startServer(config, logs.log);
  });
  afterAll(async () => {
    await server?.close();
    logs.close();
    t.cleanup();
  });

  it('keys made and rolled by the CLI take effect at once', async () => {
    const base = `http://127.0.0.1:${server.httpPort}`;
    const out = JSON.parse(await runCli(['accounts', 'create', '--name', 'Live', '--plan', 'paid', '--json', '--data-dir', t.dir]));
    const created = await api(base, out.secretKey, 'POST', '/v2/streams', { title: 'from cli key' });
    expect(created.status, created.text).toBe(201);
    const pk = await api(base, out.publishableKey, 'GET', `/v2/streams/${created.json.id}`);
    expect(pk.status).toBe(200);
    expect(pk.json.streamKey).toBeUndefined();
    const rolled = JSON.parse(await runCli(['keys', 'roll', '--key', out.secretKey, '--json', '--data-dir', t.dir]));
    const old = await api(base, out.secretKey, 'GET', '/v2/streams');
    expect(old.status).toBe(401);
    expect(old.json.error.code).toBe('key_revoked');
    const fresh = await api(base, rolled.key, 'GET', '/v2/streams');
    expect(fresh.status).toBe(200);
    expect(fresh.json.data.map((s: { id: string }) => s.id)).toEqual([created.json.id]);
  });
});

describe('skylark accounts set-login', () => {
  const t = tempDir('skylark-cli-login-');
  let server: CliServer;
  let account: string;

  beforeAll(async () => {
    server = await startCli(t.dir);
    account = (await waitFor(() => /^Created the default account (acct_[A-Za-z0-9]+)\./m.exec(server.stderr())?.[1], 10_000, 20, 'the first-start message'))!;
    await runCli(['accounts', 'create', '--name', 'Taken', '--email', 'taken@example.com', '--password', 'x', '--data-dir', t.dir]);
  });
  afterAll(async () => {
    await server?.stop();
    t.cleanup();
  });

  it('the first-start message shows the keys once and names the command, with the data dir', () => {
    const err = server.stderr();
    expect(err).toMatch(/^secretKey: svc_sk_[A-Za-z0-9]{32}$/m);
    expect(err).toMatch(/^publishableKey: svc_pk_[A-Za-z0-9]{32}$/m);
    expect(err).toContain(`npx skylark accounts set-login --account ${account} --email you@example.com --data-dir ${t.dir}\n`);
  });

  it('gives the default account a dashboard login while serve runs; the password comes from stdin', async () => {
    expect((await dashboardSignIn(server.http, 'owner@example.com', 'first pass phrase')).status).toBe(401);
    const r = await runCliWithInput(['accounts', 'set-login', '--account', account, '--email', 'Owner@Example.com', '--json', '--data-dir', t.dir], 'first pass phrase\nignored second line\n');
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout).account).toMatchObject({ id: account, object: 'account', email: 'owner@example.com' });
    expect(r.stdout + r.stderr).not.toContain('first pass phrase');
    const signedIn = await dashboardSignIn(server.http, 'owner@example.com', 'first pass phrase');
    expect(signedIn.status).toBe(303);
    const page = await fetch(`${server.http}/dashboard`, { headers: { Cookie: signedIn.cookie }, redirect: 'manual' });
    expect(page.status).toBe(200);
    await page.arrayBuffer();
    expect((await dashboardSignIn(server.http, 'owner@example.com', 'ignored second line')).status).toBe(401);
  });

  it('run again, replaces the login (CRLF line) and ends the sessions of the earlier one', async () => {
    const before = await dashboardSignIn(server.http, 'owner@example.com', 'first pass phrase');
    expect(before.status).toBe(303);
    const r = await runCliWithInput(['accounts', 'set-login', '--account', account, '--email', 'owner@example.com', '--data-dir', t.dir], 'second pass phrase\r\n');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^login set: owner@example\.com signs in to acct_/);
    expect((await dashboardSignIn(server.http, 'owner@example.com', 'first pass phrase')).status).toBe(401);
    expect((await dashboardSignIn(server.http, 'owner@example.com', 'second pass phrase')).status).toBe(303);
    const old = await fetch(`${server.http}/dashboard`, { headers: { Cookie: before.cookie }, redirect: 'manual' });
    expect(old.status).toBe(303);
    expect(old.headers.get('location')).toMatch(/\/dashboard\/login/);
    await old.arrayBuffer();
  });

  it.each([
    ['an unknown account', ['--account', 'acct_nope', '--email', 'x@example.com'], 'pw\n', 1, /no such account: acct_nope/],
    ['an email another account has', ['--email', 'taken@example.com'], 'pw\n', 1, /an account with the email taken@example\.com already exists/],
    ['an empty stdin', ['--email', 'x@example.com'], '', 1, /no password on stdin/],
    ['an empty first line', ['--email', 'x@example.com'], '\nsecond\n', 1, /the password is empty/],
    ['a password on the command line', ['--email', 'x@example.com', '--password', 'pw'], 'pw\n', 2, /password/],
    ['no --email', [], 'pw\n', 2, /--email/],
  ])('refuses %s with a message', async (_what, extra, stdin, code, message) => {
    const args = ['accounts', 'set-login', ...(extra.includes('--account') ? [] : ['--account', account]), ...extra, '--data-dir', t.dir];
    const r = await runCliWithInput(args, stdin);
    expect(r.code).toBe(code);
    expect(r.stderr).toMatch(message);
    expect(r.stderr).not.toMatch(/\n\s+at /);
    expect((await dashboardSignIn(server.http, 'owner@example.com', 'second pass phrase')).status).toBe(303); // untouched
  });
});
