/**
 * Token streams and publishable keys (docs/behaviour.md §13): a listener token minted with a
 * publishable key (or an OAuth token without `streams:write`) is refused by a `playback: "token"`
 * stream on every way in — HLS playlists, LL-HLS parts, `/listen`, the Icecast port, WHEP — unless
 * the stream allows them (`playback: {mode: "token", publishableKeyTokens: true}`); a secret key's
 * and an OAuth token's with `streams:write` open it. The object form is accepted on create and
 * PATCH and answered as the OpenAPI document describes; turning it back to `"token"` ends the open
 * `/listen` connections of publishable-key tokens. Two HTTP threads: every HLS check is made over
 * fresh connections (curl), so the worker thread's mirrored policy is checked too.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import http from 'node:http';
import net from 'node:net';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { ChildProcess } from 'node:child_process';
import { api, startInProcess, waitFor, type TestServer } from '../../helpers/server.js';
import { exited, publish } from '../../helpers/publish.js';
import { OAuthClients } from '../../../src/control/oauth/clients.js';
import { OAuthRepo } from '../../../src/base/db/oauth-repo.js';

const run = promisify(execFile);
let t: TestServer;
let pub: ChildProcess | null = null;
const open: http.ClientRequest[] = [];

beforeAll(async () => {
  t = await startInProcess({ SKYLARK_HTTP_THREADS: '2', SKYLARK_ABR_LADDER: '0' });
});
afterAll(async () => {
  for (const r of open) r.destroy();
  pub?.kill('SIGKILL');
  if (pub) await exited(pub);
  await t?.close();
});

/** Status codes of `n` GETs of `url`, each on a new connection (curl). */
async function statuses(url: string, n = 6): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push(Number((await run('curl', ['-s', '-o', '/dev/null', '-w', '%{http_code}', '--max-time', '5', url])).stdout));
  return out;
}

/** The status line of a GET on the Icecast port (HTTP/1.0, as radio players send it). */
function icecastStatus(path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = net.connect(t.server.icecastPort, '127.0.0.1', () => s.write(`GET ${path} HTTP/1.0\r\n\r\n`));
    let buf = '';
    s.on('data', (d) => {
      buf += d.toString('latin1');
      const i = buf.indexOf('\r\n');
      if (i >= 0) {
        s.destroy();
        resolve(buf.slice(0, i));
      }
    });
    s.on('error', reject);
  });
}

/** Opens `/listen` with `url`; resolves to its status and whether the server has ended it. */
function listen(url: string): Promise<{ status: number; ended: () => boolean }> {
  return new Promise((resolve, reject) => {
    let ended = false;
    const req = http.get(url, { agent: false }, (res) => {
      res.on('data', () => {});
      const done = () => (ended = true);
      res.on('end', done);
      res.on('close', done);
      res.on('error', done);
      resolve({ status: res.statusCode!, ended: () => ended });
    });
    open.push(req);
    req.on('error', reject);
  });
}

const whepStatus = async (id: string, token: string) =>
  (await fetch(`${t.http}/whep/${id}`, { method: 'POST', headers: { 'Content-Type': 'application/sdp', Authorization: `Bearer ${token}` }, body: 'v=0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\n' })).status;

describe('listener tokens minted with a publishable key', () => {
  it('are refused by a token stream on HLS, LL-HLS, /listen, the Icecast port and WHEP unless the stream allows them', async () => {
    const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Members', playback: 'token', latencyMode: 'low', reconnectWindow: 1 })).json;
    expect(s.playback).toBe('token');
    pub = publish(`${s.rtmpUrl}/${s.streamKey}`, { seconds: 120 });
    const mint = async (key: string) => (await api(t.http, key, 'POST', `/v2/streams/${s.id}/listener_tokens`)).json.token as string;
    const secret = await mint(t.secretKey);
    const publishable = await mint(t.publishableKey);
    // OAuth access tokens of one application: with streams:write, and with streams:read only.
    const repo = new OAuthRepo(t.server.db);
    const client = new OAuthClients(repo).create({ name: 'Player', redirectUris: ['https://app.example/cb'], public: false });
    await t.server.guard.tokens!.ensureKey();
    const oauth = async (scope: string) => {
      const grantId = `grant_${scope.replace(/\W/g, '')}`;
      repo.insertGrant({ id: grantId, client_id: client.clientId, account_id: t.accountId, scope, created_at: Date.now() });
      return mint((await t.server.guard.tokens!.sign({ accountId: t.accountId, clientId: client.clientId, scope, grantId })).token);
    };
    const oauthWrite = await oauth('streams:read streams:write');
    const oauthRead = await oauth('streams:read');

    await waitFor(async () => (await fetch(`${s.hlsUrl}?token=${secret}`)).status === 200, 20_000, 200, 'HLS');
    const media = new URL(`a128/index.m3u8`, s.hlsUrl);
    const playlist = await waitFor(async () => {
      const body = await (await fetch(`${media}?token=${secret}`)).text();
      return /#EXT-X-PART:.*URI="/.test(body) ? body : null;
    }, 20_000, 200, 'a part');
    const part = new URL(/#EXT-X-PART:[^\n]*URI="([^"?]+)/.exec(playlist)![1]!, media);
    const listenUrl = `${s.listenUrl}?token=`;

    for (const tok of [publishable, oauthRead]) {
      expect(await statuses(`${s.hlsUrl}?token=${tok}`)).toEqual(Array(6).fill(403));
      expect(await statuses(`${media}?token=${tok}`)).toEqual(Array(6).fill(403));
      expect(await statuses(`${part}?token=${tok}`, 2)).toEqual([403, 403]);
      expect(await statuses(`${listenUrl}${tok}`, 2)).toEqual([403, 403]);
      expect(await icecastStatus(`/live/${s.id}?token=${tok}`)).toMatch(/^HTTP\/1\.[01] 403/);
      expect(await whepStatus(s.id, tok)).toBe(401);
    }
    const refusal = (await (await fetch(`${s.hlsUrl}?token=${publishable}`)).json()) as { error: { code: string; message: string } };
    expect(refusal.error).toMatchObject({ code: 'invalid_token' });
    expect(refusal.error.message).toMatch(/publishable key/);
    for (const tok of [secret, oauthWrite]) {
      expect(await statuses(`${s.hlsUrl}?token=${tok}`)).toEqual(Array(6).fill(200));
      expect(await statuses(`${part}?token=${tok}`, 2)).toEqual([200, 200]);
      expect(await icecastStatus(`/live/${s.id}?token=${tok}`)).toMatch(/^HTTP\/1\.[01] 200/);
    }

    // The stream allows them: the object form, answered as such (validated against the OpenAPI document).
    const allowed = await api(t.http, t.secretKey, 'PATCH', `/v2/streams/${s.id}`, { playback: { mode: 'token', publishableKeyTokens: true } });
    expect(allowed.status).toBe(200);
    expect(allowed.json.playback).toEqual({ mode: 'token', publishableKeyTokens: true });
    expect((await api(t.http, t.secretKey, 'GET', `/v2/streams/${s.id}`)).json.playback).toEqual({ mode: 'token', publishableKeyTokens: true });
    await waitFor(async () => (await statuses(`${s.hlsUrl}?token=${publishable}`)).every((c) => c === 200), 10_000, 250, 'publishable tokens admitted');
    expect(await statuses(`${part}?token=${publishable}`, 2)).toEqual([200, 200]);
    const reader = await listen(`${listenUrl}${publishable}`);
    expect(reader.status).toBe(200);
    const keeper = await listen(`${listenUrl}${secret}`);
    expect(keeper.status).toBe(200);

    // Back to the string form: publishable-key tokens are refused again, and their open connection ends.
    const back = await api(t.http, t.secretKey, 'PATCH', `/v2/streams/${s.id}`, { playback: 'token' });
    expect(back.json.playback).toBe('token');
    await waitFor(() => reader.ended(), 15_000, 100, 'the publishable-token /listen connection ended');
    expect(keeper.ended()).toBe(false);
    await waitFor(async () => (await statuses(`${s.hlsUrl}?token=${publishable}`)).every((c) => c === 403), 10_000, 250, 'refused again');
  }, 120_000);

  it('the object form is accepted on create and validated', async () => {
    const c = await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Open door', playback: { mode: 'token', publishableKeyTokens: true } });
    expect(c.status).toBe(201);
    expect(c.json.playback).toEqual({ mode: 'token', publishableKeyTokens: true });
    const plain = await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Plain', playback: { mode: 'token' } });
    expect(plain.json.playback).toBe('token');
    for (const bad of [{ mode: 'public', publishableKeyTokens: true }, { mode: 'token', publishableKeyTokens: 'yes' }, { mode: 'members' }, 'members', 5]) {
      const r = await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'Bad', playback: bad });
      expect(r.status, JSON.stringify(bad)).toBe(400);
      expect(r.json.error.param).toMatch(/^playback/);
    }
  });
});
