/**
 * scripts/scan-secrets.mjs, the CI check that no test log holds a secret: it reports every real
 * secret shape (with file and line, never the secret itself) and exits 1; it passes field names
 * such as `rt_count`, ids, short look-alikes and the logger's `…REDACTED` forms; it exits 2 when it
 * was given nothing to scan, so a log directory nobody wrote to cannot pass silently.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { execFile } from 'node:child_process';
import { SignJWT } from 'jose';
import { repoRoot, tempDir } from '../../helpers/server.js';
import { generateApiKey } from '../../../src/base/auth/api-keys.js';
import { makeStreamKey } from '../../../src/control/services/streams.js';
import { newSigningSecret } from '../../../src/control/services/webhooks.js';
import { newId, randomBase62 } from '../../../src/base/ids.js';
import { createLogger } from '../../../src/base/logger.js';

const script = path.join(repoRoot, 'scripts', 'scan-secrets.mjs');

/** Runs the scan on `paths`; resolves to its exit code and output. */
function scan(...paths: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [script, ...paths], (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? -1) : 0, stdout, stderr });
    });
  });
}

const tmp = tempDir('skylark-scan-');
afterAll(() => tmp.cleanup());

const jwt = await new SignJWT({ sub: 'acct_x' }).setProtectedHeader({ alg: 'HS256' }).setIssuedAt().sign(new Uint8Array(32).fill(1));
const SECRETS: Array<[string, string]> = [
  ['stream key', makeStreamKey('eu-west-1')],
  ['stream key', makeStreamKey('ap-southeast-1')],
  ['API key', generateApiKey('secret')],
  ['API key', generateApiKey('publishable')],
  ['API key', `svc_pub_${randomBase62(32)}`],
  ['webhook signing secret', newSigningSecret()],
  ['OAuth refresh token', `rt_${randomBase62(43)}`],
  ['OAuth client secret', `cs_${randomBase62(40)}`],
  ['JWT', jwt],
];

describe('scan-secrets', () => {
  it('passes logs without secrets: field names, ids, look-alikes and redacted forms', async () => {
    const dir = path.join(tmp.dir, 'clean');
    mkdirSync(path.join(dir, 'nested'), { recursive: true });
    const lines: string[] = [];
    const log = createLogger('debug', 'skylark', (l) => lines.push(l));
    for (const [, secret] of SECRETS) log.warn(`refused ${secret}`, { reason: secret });
    writeFileSync(path.join(dir, 'redacted.log'), lines.join(''));
    writeFileSync(
      path.join(dir, 'nested', 'lookalikes.log'),
      [
        '{"rt_count":3,"cs_total":9,"msg":"rt_count is a field name"}',
        `{"streamId":"${newId('stm')}","account":"${newId('acct')}","key":"${newId('key')}"}`,
        '{"msg":"part_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcdefg is glued to a word"}',
        '{"msg":"svc_sk_short sk_euw1_tooShort whsec_x rt_ cs_"}',
        '{"msg":"task_queue1_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"}',
      ].join('\n'),
    );
    const r = await scan(dir);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('scan-secrets: no secret in 2 file(s)\n');
  });

  it('reports every secret shape with file and line, never the secret, and exits 1', async () => {
    const dir = path.join(tmp.dir, 'leaky');
    mkdirSync(dir, { recursive: true });
    const file = path.join(dir, 'server.log');
    writeFileSync(file, ['{"msg":"clean line"}', ...SECRETS.map(([, s], i) => `{"msg":"line ${i}","value":"x ${s} y"}`)].join('\n') + '\n');
    const r = await scan(dir);
    expect(r.code).toBe(1);
    const reported = r.stdout.trim().split('\n');
    expect(reported).toHaveLength(SECRETS.length);
    SECRETS.forEach(([kind], i) => expect(reported[i]).toMatch(new RegExp(`^${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:${i + 2}: ${kind} `)));
    for (const [, secret] of SECRETS) expect(r.stdout + r.stderr).not.toContain(secret.slice(-12));
    expect(r.stderr).toMatch(/9 secret\(s\) in 1 of 1 file\(s\)/);
  });

  it('exits 2 when there is nothing to scan or the path does not exist', async () => {
    const empty = path.join(tmp.dir, 'empty');
    mkdirSync(empty, { recursive: true });
    expect((await scan(empty)).code).toBe(2);
    expect((await scan(empty)).stderr).toMatch(/no file to scan/);
    expect((await scan(path.join(tmp.dir, 'missing'))).code).toBe(2);
    expect((await scan()).code).toBe(2);
  });
});
