/**
 * `skylark edge-config --tls-cert … --tls-key …` (docs/edges.md "TLS and HTTP/2"): the printed
 * nginx.conf, run by the machine's nginx with a self-signed certificate (openssl) in front of a
 * real node with a real FFmpeg publisher, serves LL-HLS over HTTP/2 with TLS: curl, negotiating
 * h2 by ALPN and checking the certificate, gets the multivariant playlist, the media playlist, a
 * blocking reload and a part over HTTP/2 (the version curl reports), and HTTP/1.1 still works.
 * The HTTP/2 form follows the nginx version (`listen … ssl http2;` before 1.25.1, `http2 on;`
 * from it), detected with `nginx -v` or given with `--nginx-version`.
 *
 * Skipped, with a message, when nginx, openssl or an HTTP/2 curl is not installed (.ci/run
 * installs nginx and curl; openssl comes with Debian).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { api, freePort, runCli, startInProcess, tempDir, waitFor, type TestServer } from '../../helpers/server.js';
import { exited, publish } from '../../helpers/publish.js';
import { nginxBinary } from '../../../bench/lib/nginx-edges.js';

const nginx = nginxBinary();
const openssl = spawnSync('openssl', ['version']).status === 0;
const curlH2 = /\bHTTP2\b/.test(spawnSync('curl', ['-V'], { encoding: 'utf8' }).stdout ?? '');
const missing = [!nginx && 'nginx', !openssl && 'openssl', !curlH2 && 'curl with HTTP2'].filter(Boolean);
if (missing.length) process.stderr.write(`edge-tls.test.ts: ${missing.join(', ')} not installed: skipped\n`);

let t: TestServer;
let pub: ReturnType<typeof publish> | undefined;
let edge: ChildProcess | undefined;
let edgeUrl = '';
let stream: { id: string; rtmpUrl: string; streamKey: string };
const dir = tempDir('skylark-edge-tls-');
let cert = '';
let key = '';


/** GET `url` with curl over TLS (the test certificate as the only CA); resolves to the body and the HTTP version curl used. */
async function curl(url: string, version: '--http2' | '--http1.1' = '--http2'): Promise<{ status: number; httpVersion: string; body: string }> {
  const marker = '\n--curl-write-out--';
  const { stdout } = await promisify(execFile)('curl', ['-sS', version, '--cacert', cert, '-w', `${marker}%{http_version} %{http_code}`, url], { maxBuffer: 16 * 1024 * 1024 });
  const at = stdout.lastIndexOf(marker);
  const [httpVersion, status] = stdout.slice(at + marker.length).split(' ');
  return { status: Number(status), httpVersion: httpVersion!, body: stdout.slice(0, at) };
}

beforeAll(async () => {
  if (missing.length) return;
  chmodSync(dir.dir, 0o755); // started as root, nginx's workers (nobody) must reach the cache dir
  cert = path.join(dir.dir, 'cert.pem');
  key = path.join(dir.dir, 'key.pem');
  const made = spawnSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', key, '-out', cert, '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'], { encoding: 'utf8' });
  if (made.status !== 0) throw new Error(`openssl: ${made.stderr}`);
  chmodSync(key, 0o644); // read by the nginx master (as whoever runs the test), not a secret here

  t = await startInProcess({ SKYLARK_TRUSTED_PROXIES: '127.0.0.1/32', SKYLARK_ABR_LADDER: '0' });
  stream = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Over h2', latencyMode: 'low' })).json;
  pub = publish(`${stream.rtmpUrl}/${stream.streamKey}`, { seconds: 120 });

  const port = await freePort();
  edgeUrl = `https://127.0.0.1:${port}`;
  const conf = await runCli(['edge-config', '--origin', t.http, '--listen', `127.0.0.1:${port}`, '--cache-dir', path.join(dir.dir, 'edge'), '--tls-cert', cert, '--tls-key', key]);
  const file = path.join(dir.dir, 'nginx.conf');
  writeFileSync(file, conf);
  edge = spawn(nginx!, ['-c', file, '-g', 'daemon off;'], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  edge.stderr!.on('data', (d) => (stderr += d));
  await waitFor(async () => {
    if (edge!.exitCode !== null) throw new Error(`nginx exited: ${stderr}`);
    return (await curl(`${edgeUrl}/v2/openapi.json`).catch(() => null))?.status === 200;
  }, 10_000, 100, 'the TLS edge to answer');
}, 60_000);

afterAll(async () => {
  if (edge && edge.exitCode === null) {
    edge.kill('SIGTERM');
    await exited(edge);
  }
  pub?.kill('SIGKILL');
  if (pub) await exited(pub);
  await t?.close();
  dir.cleanup();
});

describe.skipIf(missing.length > 0)('edge-config with TLS and HTTP/2 in front of a node', () => {
  it('writes the HTTP/2 form of the nginx version: listen … ssl http2 before 1.25.1, http2 on from it; nginx -t takes the one for the machine', async () => {
    const plainArgs = ['edge-config', '--origin', 'http://127.0.0.1:8080', '--listen', '0.0.0.0:443', '--cache-dir', path.join(dir.dir, 'forms'), '--no-mkdir'];
    const base = [...plainArgs, '--tls-cert', cert, '--tls-key', key];
    const old = await runCli([...base, '--nginx-version', '1.22.1']);
    expect(old).toMatch(/^\s*listen 0\.0\.0\.0:443 ssl http2 backlog=4096;$/m);
    expect(old).not.toMatch(/^\s*http2 on;$/m);
    expect(old).toContain(`ssl_certificate ${cert};`);
    expect(old).toContain(`ssl_certificate_key ${key};`);
    const current = await runCli([...base, '--nginx-version', '1.25.1']);
    expect(current).toMatch(/^\s*listen 0\.0\.0\.0:443 ssl backlog=4096;$/m);
    expect(current).toMatch(/^\s*http2 on;$/m);
    // Without TLS: plain listen, no certificate.
    const plain = await runCli(plainArgs);
    expect(plain).toMatch(/^\s*listen 0\.0\.0\.0:443 backlog=4096;$/m);
    expect(plain).not.toContain('ssl');

    // Run on this machine (no --nginx-version): its nginx -v decides, and its nginx -t accepts the file.
    const root = tempDir('skylark-edge-tls-t-');
    try {
      chmodSync(root.dir, 0o755);
      const file = path.join(root.dir, 'nginx.conf');
      writeFileSync(file, await runCli(['edge-config', '--origin', 'http://127.0.0.1:8080', '--listen', '127.0.0.1:1', '--cache-dir', path.join(root.dir, 'edge'), '--tls-cert', cert, '--tls-key', key]));
      const r = spawnSync(nginx!, ['-t', '-c', file], { encoding: 'utf8' });
      expect(r.status, r.stderr).toBe(0);
      expect(r.stderr).not.toMatch(/deprecated|warn/);
    } finally {
      root.cleanup();
    }
  });

  it('serves the multivariant playlist, the media playlist, a blocking reload and a part over HTTP/2 with TLS', async () => {
    const base = `${edgeUrl}/hls/${stream.id}/`;
    // Playable through the edge: the media playlist lists parts.
    const { mv, mediaUrl, media } = await waitFor(async () => {
      const mv = await curl(`${base}index.m3u8`);
      if (mv.status !== 200) return null;
      const uri = mv.body.split('\n').find((l) => l && !l.startsWith('#'));
      if (!uri) return null;
      const mediaUrl = new URL(uri, base).href;
      const media = await curl(mediaUrl);
      return media.status === 200 && media.body.includes('#EXT-X-PART:') ? { mv, mediaUrl, media } : null;
    }, 30_000, 250, 'the stream to be playable through the TLS edge');
    expect(mv.httpVersion).toBe('2');
    expect(mv.body).toMatch(/^#EXTM3U/);
    expect(media.httpVersion).toBe('2');

    // A blocking reload for the next segment's first part, as an LL-HLS player asks (docs/ll-hls.md).
    const msn = Number(/#EXT-X-MEDIA-SEQUENCE:(\d+)/.exec(media.body)![1]) + media.body.split('\n').filter((l) => l.startsWith('#EXTINF')).length;
    const reload = await curl(`${mediaUrl}${mediaUrl.includes('?') ? '&' : '?'}_HLS_msn=${msn}&_HLS_part=0`);
    expect(reload.status).toBe(200);
    expect(reload.httpVersion).toBe('2');

    const partUri = /#EXT-X-PART:[^\n]*URI="([^"]+)"/.exec(reload.body)![1]!;
    const part = await promisify(execFile)('curl', ['-sS', '--http2', '--cacert', cert, '-o', path.join(dir.dir, 'part.m4s'), '-w', '%{http_version} %{http_code} %{size_download}', new URL(partUri, mediaUrl).href]);
    const [version, status, size] = part.stdout.split(' ');
    expect(version).toBe('2');
    expect(status).toBe('200');
    expect(Number(size)).toBeGreaterThan(0);

    // HTTP/1.1 over TLS still answers (players and tools without h2).
    const h1 = await curl(`${base}index.m3u8`, '--http1.1');
    expect(h1.status).toBe(200);
    expect(h1.httpVersion).toBe('1.1');
  });
});
