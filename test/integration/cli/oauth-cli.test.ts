/**
 * `skylark oauth-clients create` (docs/behaviour.md §1): prints `clientId` and `clientSecret` (null for
 * `--public`), refuses bad redirect URIs, and the client works against a server on the same data dir.
 * Runs the compiled CLI: `npx tsc -p tsconfig.build.json` first.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { repoRoot, runCli, tempDir } from '../../helpers/server.js';
import { loadConfig } from '../../../src/base/config.js';
import { createLogger } from '../../../src/base/logger.js';
import { startServer } from '../../../src/main.js';

const tmp = tempDir('skylark-oauth-cli-');
beforeAll(() => {
  if (!existsSync(path.join(repoRoot, 'dist', 'cli', 'main.js'))) throw new Error('dist/ is missing: run `npx tsc -p tsconfig.build.json` first');
});
afterAll(() => tmp.cleanup());

async function cliFails(args: string[]): Promise<{ code: number; stderr: string }> {
  try {
    await promisify(execFile)(process.execPath, [path.join(repoRoot, 'bin', 'skylark.js'), ...args]);
  } catch (e) {
    const err = e as { code?: number; stderr?: string };
    return { code: err.code ?? -1, stderr: err.stderr ?? '' };
  }
  throw new Error('expected the command to fail');
}

describe('skylark oauth-clients create', () => {
  it('--json prints clientId and clientSecret; the secret authenticates at the token endpoint', async () => {
    const out = JSON.parse(await runCli(['oauth-clients', 'create', '--name', 'Acme', '--redirect-uri', 'https://acme.example/cb', '--redirect-uri', 'http://127.0.0.1:8765/cb', '--json', '--data-dir', tmp.dir]));
    expect(out.clientId).toMatch(/^client_[A-Za-z0-9]{24}$/);
    expect(out.clientSecret).toMatch(/^cs_[A-Za-z0-9]{40}$/);
    expect(out.client).toMatchObject({ object: 'oauth_client', name: 'Acme', public: false, redirectUris: ['https://acme.example/cb', 'http://127.0.0.1:8765/cb'] });
    const srv = await startServer(loadConfig({ SKYLARK_HTTP_PORT: '0', SKYLARK_RTMP_PORT: '0', SKYLARK_ICECAST_PORT: '0', SKYLARK_DATA_DIR: tmp.dir, SKYLARK_LOG_LEVEL: 'error' }), createLogger('error'));
    try {
      const tokenUrl = `http://127.0.0.1:${srv.httpPort}/oauth/token`;
      const form = (secret: string) => ({
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: `Basic ${Buffer.from(`${out.clientId}:${secret}`).toString('base64')}` },
        body: 'grant_type=refresh_token&refresh_token=rt_unknown',
      });
      const good = await fetch(tokenUrl, form(out.clientSecret));
      expect(good.status).toBe(400); // authenticated; the refresh token is what is wrong
      expect(((await good.json()) as { error: string }).error).toBe('invalid_grant');
      const bad = await fetch(tokenUrl, form('cs_wrong'));
      expect(bad.status).toBe(401);
      const authorize = await fetch(`http://127.0.0.1:${srv.httpPort}/oauth/authorize?client_id=${out.clientId}&redirect_uri=${encodeURIComponent('https://acme.example/cb')}&response_type=code&scope=streams:read`, { redirect: 'manual' });
      expect(authorize.status).toBe(200);
    } finally {
      await srv.close();
    }
  });

  it('--public has no secret; the text output says so', async () => {
    const out = JSON.parse(await runCli(['oauth-clients', 'create', '--name', 'App', '--redirect-uri', 'com.acme.app:/cb', '--public', '--json', '--data-dir', tmp.dir]));
    expect(out.clientSecret).toBeNull();
    expect(out.client.public).toBe(true);
    const text = await runCli(['oauth-clients', 'create', '--name', 'App2', '--redirect-uri', 'https://a.example/cb', '--public', '--data-dir', tmp.dir]);
    expect(text).toMatch(/^clientId: client_/);
    expect(text).toMatch(/PKCE/);
  });

  it('refuses bad redirect URIs and missing flags', async () => {
    for (const uri of ['http://acme.example/cb', 'https://acme.example/cb#frag', 'not a uri', 'javascript:alert(1)']) {
      const r = await cliFails(['oauth-clients', 'create', '--name', 'X', '--redirect-uri', uri, '--data-dir', tmp.dir]);
      expect(r.code, uri).toBe(1);
      expect(r.stderr).toMatch(/redirect URI/);
    }
    expect((await cliFails(['oauth-clients', 'create', '--name', 'X', '--data-dir', tmp.dir])).code).toBe(2);
    expect((await cliFails(['oauth-clients', 'create', '--redirect-uri', 'https://a.example/cb', '--data-dir', tmp.dir])).code).toBe(2);
  });
});
