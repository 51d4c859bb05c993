/**
 * The logger never writes a secret (docs/behaviour.md §2 "The key never appears in a … log line", §13):
 * every secret shape Skylark makes — stream keys, API keys (and the retired `svc_pub_`), webhook
 * signing secrets, OAuth refresh tokens and client secrets, JWTs — is replaced by its prefix and
 * `…REDACTED` wherever it sits in a line (message, string fields, nested objects and arrays), while
 * ids, field names such as `rt_count` and lines without a secret are left exactly as they were.
 */
import { describe, expect, it } from 'vitest';
import { SignJWT } from 'jose';
import { createLogger, redactSecrets } from '../../../../src/base/logger.js';
import { generateApiKey } from '../../../../src/base/auth/api-keys.js';
import { makeStreamKey } from '../../../../src/control/services/streams.js';
import { newSigningSecret } from '../../../../src/control/services/webhooks.js';
import { newId, randomBase62 } from '../../../../src/base/ids.js';

/** A logger at debug level whose lines are collected, parsed. */
function collecting() {
  const lines: string[] = [];
  const log = createLogger('debug', 'test', (l) => lines.push(l));
  return { log, lines, parsed: () => lines.map((l) => JSON.parse(l) as Record<string, unknown>) };
}

const jwt = await new SignJWT({ sub: 'acct_x', scope: 'streams:read' }).setProtectedHeader({ alg: 'HS256' }).setIssuedAt().sign(new Uint8Array(32).fill(7));

/** One secret of each shape, as the code that makes them makes them, with its kept prefix. */
const SECRETS: Array<[string, string, string]> = [
  ['stream key (eu-west-1)', makeStreamKey('eu-west-1'), 'sk_euw1_'],
  ['stream key (ap-southeast-1)', makeStreamKey('ap-southeast-1'), 'sk_apse1_'],
  ['secret API key', generateApiKey('secret'), 'svc_sk_'],
  ['publishable API key', generateApiKey('publishable'), 'svc_pk_'],
  ['retired publishable key', `svc_pub_${randomBase62(32)}`, 'svc_pub_'],
  ['webhook signing secret', newSigningSecret(), 'whsec_'],
  ['OAuth refresh token', `rt_${randomBase62(43)}`, 'rt_'], // src/control/oauth/service.ts
  ['OAuth client secret', `cs_${randomBase62(40)}`, 'cs_'], // src/control/oauth/clients.ts
  ['JWT', jwt, 'eyJ'],
];

describe('redactSecrets', () => {
  it.each(SECRETS)('replaces a %s by its prefix and …REDACTED', (_kind, secret, prefix) => {
    const out = redactSecrets(`before ${secret} after`);
    expect(out).toBe(`before ${prefix}…REDACTED after`);
    expect(out).not.toContain(secret.slice(prefix.length, prefix.length + 8));
  });

  it('redacts a stream key mistyped into an RTMP app path, and a cut-short one', () => {
    const key = makeStreamKey('eu-west-1');
    const app = `live/${newId('stm')}/${key}`;
    expect(redactSecrets(`unknown application '${app.slice(0, 80)}'`)).toMatch(/^unknown application 'live\/stm_[A-Za-z0-9]{24}\/sk_euw1_…REDACTED'$/);
    expect(redactSecrets(`rtmp://127.0.0.1:1935/${key}?x=1`)).toBe('rtmp://127.0.0.1:1935/sk_euw1_…REDACTED?x=1');
    expect(redactSecrets(`${key.slice(0, 20)}`)).toBe('sk_euw1_…REDACTED');
  });

  it('redacts every secret of a string, after any non-alphanumeric character', () => {
    const [a, b] = [generateApiKey('secret'), newSigningSecret()];
    expect(redactSecrets(`Bearer ${a},"${b}"\n${a}`)).toBe('Bearer svc_sk_…REDACTED,"whsec_…REDACTED"\nsvc_sk_…REDACTED');
  });

  it.each([
    'rt_count',
    'cs_total',
    'task_queue_processing',
    'the part_abcdefghijklmnop is not a token',
    'docs_AbCdEfGhIjKlMnOpQr',
    newId('stm'),
    newId('acct'),
    newId('key'),
    newId('evt'),
    'sk_euw1_…REDACTED',
    'svc_sk_short',
    'a plain message with no secret',
  ])('leaves %j as it is', (text) => {
    expect(redactSecrets(text)).toBe(text);
  });
});

describe('createLogger', () => {
  it('redacts the message and string fields at any depth; other values and field names stay', () => {
    const { log, lines, parsed } = collecting();
    const key = makeStreamKey('eu-west-1');
    const apiKey = generateApiKey('secret');
    const refresh = `rt_${randomBase62(43)}`;
    log.warn(`publish refused for ${key}`, {
      reason: `wrong key ${key}`,
      rt_count: 3,
      nested: { header: `Bearer ${apiKey}`, list: ['ok', refresh, { deeper: jwt }] },
      streamId: 'stm_abc',
    });
    expect(lines).toHaveLength(1);
    for (const s of [key, apiKey, refresh, jwt]) expect(lines[0]).not.toContain(s);
    expect(parsed()[0]).toMatchObject({
      level: 'warn',
      component: 'test',
      msg: 'publish refused for sk_euw1_…REDACTED',
      reason: 'wrong key sk_euw1_…REDACTED',
      rt_count: 3,
      nested: { header: 'Bearer svc_sk_…REDACTED', list: ['ok', 'rt_…REDACTED', { deeper: 'eyJ…REDACTED' }] },
      streamId: 'stm_abc',
    });
  });

  it('child loggers redact too', () => {
    const { log, parsed } = collecting();
    log.child('rtmp').info('closed', { reason: newSigningSecret() });
    expect(parsed()[0]).toMatchObject({ component: 'test.rtmp', reason: 'whsec_…REDACTED' });
  });

  it('writes a line without secrets exactly as JSON.stringify would', () => {
    const { log, lines } = collecting();
    const fields = { streamId: 'stm_x', n: 1, ok: true, list: [1, 'two'], nested: { a: null } };
    log.info('stream live', fields);
    const { time, ...rest } = JSON.parse(lines[0]!);
    expect(lines[0]).toBe(JSON.stringify({ time, level: 'info', component: 'test', msg: 'stream live', ...fields }) + '\n');
    expect(rest.msg).toBe('stream live');
  });
});
