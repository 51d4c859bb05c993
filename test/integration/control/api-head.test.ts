/**
 * HEAD on the API's GET routes (RFC 9110 §9.3.2): the status and headers GET would answer, with
 * `Content-Length` of GET's body and no body — for an object, a list, a refusal and an unknown id —
 * checked with curl, a client no one here wrote. `Allow` of a 405 names HEAD beside GET.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { api, startInProcess, type TestServer } from '../../helpers/server.js';

const run = promisify(execFile);
let s: TestServer;
let streamId: string;

beforeAll(async () => {
  s = await startInProcess();
  streamId = (await api(s.http, s.secretKey, 'POST', '/v2/streams', { title: 'Heads' })).json.id;
});
afterAll(async () => {
  await s?.close();
});

/** `curl -sS -I` (a HEAD): the status and the headers, lower-cased names; and whether any body byte came. */
async function curlHead(p: string, key: string | null): Promise<{ status: number; headers: Record<string, string>; bodyBytes: number }> {
  const args = ['-sS', '-I', '--max-time', '10', '-w', '%{size_download}'];
  if (key) args.push('-H', `Authorization: Bearer ${key}`);
  const { stdout } = await run('curl', [...args, `${s.http}${p}`]);
  const blocks = stdout.split('\r\n\r\n');
  const lines = blocks[0]!.split('\r\n');
  const headers: Record<string, string> = {};
  for (const l of lines.slice(1)) {
    const i = l.indexOf(':');
    headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
  }
  return { status: Number(lines[0]!.split(' ')[1]), headers, bodyBytes: Number(blocks.at(-1)) };
}

describe('HEAD on API GET routes', () => {
  for (const [what, p, key] of [
    ['an object', () => `/v2/streams/${streamId}`, true],
    ['a list', () => '/v2/streams?limit=3', true],
    ['an unknown id', () => '/v2/streams/stm_doesnotexist', true],
    ['a request without a key', () => `/v2/streams/${streamId}`, false],
  ] as const) {
    it(`answers ${what} with GET's status and headers and no body`, async () => {
      const get = await fetch(`${s.http}${p()}`, { headers: key ? { authorization: `Bearer ${s.secretKey}` } : {} });
      const body = Buffer.from(await get.arrayBuffer());
      const head = await curlHead(p(), key ? s.secretKey : null);
      expect(head.status).toBe(get.status);
      expect(head.bodyBytes).toBe(0);
      expect(Number(head.headers['content-length'])).toBe(body.byteLength);
      expect(head.headers['content-type']).toBe(get.headers.get('content-type'));
      expect(head.headers['cache-control']).toBe('no-store');
      expect(head.headers['access-control-allow-origin']).toBe('*');
      expect(head.headers['x-request-id']).toMatch(/^req_/);
    });
  }

  it('names HEAD in Allow when a method is not allowed', async () => {
    const r = await fetch(`${s.http}/v2/streams/${streamId}`, { method: 'PUT', headers: { authorization: `Bearer ${s.secretKey}` } });
    expect(r.status).toBe(405);
    const allow = (r.headers.get('allow') ?? '').split(/\s*,\s*/);
    expect(allow).toEqual(expect.arrayContaining(['GET', 'HEAD']));
  });
});
