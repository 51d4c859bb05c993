/**
 * `skylark import-icecast` (docs/cli.md, docs/icecast.md "Moving from Icecast") on an Icecast 2.4
 * icecast.xml (test/fixtures/icecast/icecast.xml: two mounts, the global source password) while a
 * real server runs on the same data dir: one stream per mount with that mount, the station identity
 * from the file, new stream keys (the Icecast password is refused by the port), and ezstream then
 * publishes to one of the mounts and a listener hears it there. Importing again is refused with
 * nothing created; `--keep-passwords` refuses a password that is no stream key and keeps one that is.
 *
 * The CLI runs the compiled code (bin/skylark.js → dist/): run `npx tsc -p tsconfig.build.json` first.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnSync, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { api, repoRoot, runCli, startInProcess, tempDir, waitFor, type TestServer } from '../../helpers/server.js';
import { basicAuth as basic, ezstreamSource, rawIcecast } from '../../helpers/icecast-clients.js';

let t: TestServer;
let port: number;
const tmp = tempDir('skylark-import-icecast-');
const children: ChildProcess[] = [];
const FIXTURE = path.join(repoRoot, 'test', 'fixtures', 'icecast', 'icecast.xml');

interface Stream {
  id: string;
  streamKey: string;
  icecastMount: string | null;
}

const raw = (request: string, limit?: number) => rawIcecast(port, request, limit);
const status = async (id: string) => (await api(t.http, t.secretKey, 'GET', `/v2/streams/${id}`)).json.status as string;
function ezstream(mount: string, key: string, seconds: number) {
  const ez = ezstreamSource(tmp.dir, port, mount, key, seconds);
  children.push(ez.p);
  return ez;
}

beforeAll(async () => {
  t = await startInProcess({ SKYLARK_ABR_LADDER: '0' });
  port = t.server.icecastPort;
});

afterAll(async () => {
  for (const c of children) c.kill('SIGKILL');
  await t?.close();
  tmp.cleanup();
});

describe('skylark import-icecast', () => {
  it('creates one stream per <mount> of icecast.xml with that mount, and ezstream publishes to one', async () => {
    const out = await runCli(['import-icecast', FIXTURE, '--data-dir', t.dataDir, '--account', t.accountId, '--json']);
    const r = JSON.parse(out) as { streams: Array<Stream & { codec: string; codecFrom: string; title: string }>; notes: string[] };
    expect(r.streams.map((s) => [s.icecastMount, s.codec, s.title])).toEqual([
      ['/stream', 'mp3', 'Night Radio'],
      ['/lounge.ogg', 'opus', 'Lounge <24/7>'],
    ]);
    expect(r.streams[0]!.codecFrom).toBe('type audio/mpeg');
    expect(r.notes.join('\n')).toMatch(/passwords are not reused/);
    for (const s of r.streams) {
      expect(s.streamKey).toMatch(/^sk_euw1_[A-Za-z0-9]{40}$/);
      expect(s.streamKey).not.toBe('hackme');
    }
    // The running server answers them through the API, with the station identity from the file.
    const got = (await api(t.http, t.secretKey, 'GET', `/v2/streams/${r.streams[0]!.id}`)).json as Stream & { metadata: Record<string, string> };
    expect(got.icecastMount).toBe('/stream');
    expect(got.metadata).toEqual({ description: 'Jazz & blues all night', genre: 'Jazz', url: 'https://radio.example/' });

    // The Icecast password is refused as a source password; the new key publishes.
    expect((await raw(`PUT /stream HTTP/1.1\r\nHost: x\r\nAuthorization: ${basic('source', 'hackme')}\r\nContent-Type: audio/mpeg\r\n\r\n`)).head).toMatch(/^HTTP\/1\.0 401/);
    const ez = ezstream('/stream', r.streams[0]!.streamKey, 20);
    await waitFor(async () => (await status(r.streams[0]!.id)) === 'live', 20_000, 100, `ezstream live on /stream (${ez.err()})`);
    const heard = await waitFor(async () => {
      const h = await raw('GET /stream HTTP/1.0\r\n\r\n', 4000);
      return /^HTTP\/1\.0 200/.test(h.head) ? h : null;
    }, 20_000, 250, '/stream to serve');
    expect(heard.body[0]).toBe(0xff);
    ez.p.kill('SIGTERM');

    // Importing the same file again would take mounts the node has: refused, nothing created.
    const before = (await api(t.http, t.secretKey, 'GET', '/v2/streams?limit=100')).json.data.length as number;
    const again = spawnSync(process.execPath, [path.join(repoRoot, 'bin', 'skylark.js'), 'import-icecast', FIXTURE, '--data-dir', t.dataDir, '--account', t.accountId], { encoding: 'utf8' });
    expect(again.status).toBe(1);
    expect(again.stderr).toMatch(/\/stream, \/lounge\.ogg/);
    expect((await api(t.http, t.secretKey, 'GET', '/v2/streams?limit=100')).json.data.length).toBe(before);
  }, 90_000);

  it('--keep-passwords: an Icecast password is no stream key → exit 1 naming the mounts, nothing created', async () => {
    const before = (await api(t.http, t.secretKey, 'GET', '/v2/streams?limit=100')).json.data.length as number;
    const r = spawnSync(process.execPath, [path.join(repoRoot, 'bin', 'skylark.js'), 'import-icecast', FIXTURE, '--keep-passwords', '--data-dir', t.dataDir, '--account', t.accountId], { encoding: 'utf8' });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('/stream, /lounge.ogg');
    expect(r.stderr).toMatch(/sk_<region code>_/);
    expect((await api(t.http, t.secretKey, 'GET', '/v2/streams?limit=100')).json.data.length).toBe(before);

    // A password that is a stream key is kept, and publishes.
    const key = `sk_euw1_${'K'.repeat(20)}${Date.now()}abcdefghijklmnop`;
    const xml = path.join(tmp.dir, 'kept.xml');
    writeFileSync(xml, `<icecast><authentication><source-password>${key}</source-password></authentication><mount><mount-name>/kept</mount-name></mount></icecast>`);
    const kept = JSON.parse(await runCli(['import-icecast', xml, '--keep-passwords', '--data-dir', t.dataDir, '--account', t.accountId, '--json'])) as { streams: Array<Stream & { codecFrom: string }> };
    expect(kept.streams[0]).toMatchObject({ icecastMount: '/kept', streamKey: key, codec: 'mp3' });
    expect(kept.streams[0]!.codecFrom).toMatch(/not stated: mp3/);
    const accepted = await raw(`PUT /kept HTTP/1.1\r\nHost: x\r\nAuthorization: ${basic('source', key)}\r\nContent-Type: audio/mpeg\r\nExpect: 100-continue\r\n\r\n`, 25);
    expect(accepted.head).toMatch(/100 Continue/);
  });
});
