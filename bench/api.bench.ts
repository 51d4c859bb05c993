/**
 * Authenticated API throughput: `GET /v2/streams/{id}` requests per second
 * through the whole /v2 path (route, Guard: authentication, rate limit and headers, scope; SQLite
 * read; JSON) with a secret API key and with an OAuth JWT access token, against a bare
 * uWebSockets.js handler answering the same status, headers and body bytes, in the same run.
 * Target: Skylark ≥ half the bare rate.
 *
 * The server runs in this process (the harness is idle while wrk runs); the account's rate limit is
 * raised so the bench measures the path, not 429s (which would also be cheap). The JWT comes from
 * the real OAuth flow (login, consent, code + PKCE exchange). wrk: 127.0.0.1 only, `-t1`, bounded.
 * Rounds interleave bare / key / JWT; each row is the median.
 *
 * Settings (environment): BENCH_API_SECONDS (5), BENCH_API_ROUNDS (3), BENCH_API_CONNS (50).
 * Alone: `npx tsx bench/api.bench.ts` (prints both rows).
 */
import { createHash } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import type uWS from 'uWebSockets.js';
import { uWS as uws } from '../src/base/http/uws.js';
import type { BenchRow } from './lib/report.js';
import { have, runToEnd } from './lib/proc.js';
import { parseWrk } from './lib/wrk.js';
import { Browser, authorizeInBrowser } from '../test/helpers/platform.js';
import { tempDir } from '../test/helpers/server.js';
import { loadConfig } from '../src/base/config.js';
import { createLogger } from '../src/base/logger.js';
import { startServer } from '../src/main.js';
import { OAuthClients } from '../src/control/oauth/clients.js';
import { OAuthRepo } from '../src/base/db/oauth-repo.js';

const GROUP = 'API: authenticated GET /v2/streams/{id} (wrk -t1, 127.0.0.1)';
const log = (m: string) => process.stderr.write(`[api] ${m}\n`);
const envNum = (name: string, dflt: number) => {
  const n = Number(process.env[name]);
  return Number.isFinite(n) && n > 0 ? n : dflt;
};

/** wrk with an Authorization header (bench/lib/wrk.ts's runWrk takes none); bounded to seconds + 30 s. */
async function wrk(url: string, seconds: number, conns: number, token: string | null): Promise<{ rps: number; non2xx: number; errors: number }> {
  const argv = ['wrk', '-t1', `-c${conns}`, `-d${seconds}s`, '--latency', ...(token ? ['-H', `Authorization: Bearer ${token}`] : []), url];
  const r = await runToEnd(argv, (seconds + 30) * 1000);
  if (r.timedOut || r.code !== 0) throw new Error(`wrk failed: ${r.stderr || r.stdout}`);
  const w = parseWrk(r.stdout);
  const e = w.socketErrors;
  return { rps: w.reqPerSec, non2xx: w.non2xx3xx, errors: e.connect + e.read + e.write + e.timeout };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

export async function run(): Promise<BenchRow[]> {
  if (!have('wrk')) throw new Error('wrk is not installed: apt-get install -y wrk');
  const seconds = envNum('BENCH_API_SECONDS', 5);
  const rounds = Math.round(envNum('BENCH_API_ROUNDS', 3));
  const conns = Math.round(envNum('BENCH_API_CONNS', 50));
  const tmp = tempDir('skylark-bench-api-');
  const srv = await startServer(loadConfig({ SKYLARK_HTTP_PORT: '0', SKYLARK_RTMP_PORT: '0', SKYLARK_ICECAST_PORT: '0', SKYLARK_DATA_DIR: tmp.dir, SKYLARK_LOG_LEVEL: 'error' }), createLogger('error'));
  let bare: uWS.us_listen_socket | null = null;
  try {
    srv.guard.limits.paid = 1e9;
    const base = `http://127.0.0.1:${srv.httpPort}`;
    const acct = await srv.accounts.create({ name: 'Bench', plan: 'paid', region: 'eu-west-1', email: 'bench@example.com', password: 'bench-password' });
    const created = await fetch(`${base}/v2/streams`, {
      method: 'POST',
      headers: { authorization: `Bearer ${acct.secretKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ title: 'Bench stream', metadata: { show: 'bench' } }),
    });
    const stream = (await created.json()) as { id: string };
    const url = `${base}/v2/streams/${stream.id}`;

    // An OAuth access token through the real flow.
    const client = new OAuthClients(new OAuthRepo(srv.db)).create({ name: 'Bench app', redirectUris: ['http://127.0.0.1:9/cb'], public: false });
    const verifier = 'v'.repeat(64);
    const challenge = createHash('sha256').update(verifier).digest('base64url');
    const authorize = `${base}/oauth/authorize?${new URLSearchParams({ client_id: client.clientId, redirect_uri: 'http://127.0.0.1:9/cb', response_type: 'code', scope: 'streams:read', state: 's', code_challenge: challenge, code_challenge_method: 'S256' })}`;
    const back = new URL(await authorizeInBrowser(new Browser(), authorize, { email: 'bench@example.com', password: 'bench-password', decision: 'allow' }));
    const tokenRes = await fetch(`${base}/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: `Basic ${Buffer.from(`${client.clientId}:${client.clientSecret}`).toString('base64')}` },
      body: new URLSearchParams({ grant_type: 'authorization_code', code: back.searchParams.get('code')!, redirect_uri: 'http://127.0.0.1:9/cb', code_verifier: verifier }).toString(),
    });
    const jwt = ((await tokenRes.json()) as { access_token: string }).access_token;

    // What Skylark answers, to be answered byte for byte by the bare handler.
    const sample = await fetch(url, { headers: { authorization: `Bearer ${acct.secretKey}` } });
    const body = Buffer.from(await sample.arrayBuffer());
    const jwtSample = await fetch(url, { headers: { authorization: `Bearer ${jwt}` } });
    if (sample.status !== 200 || jwtSample.status !== 200) throw new Error(`setup: key ${sample.status}, JWT ${jwtSample.status}`);
    const headers = [...sample.headers].filter(([k]) => !['content-length', 'date', 'connection', 'uwebsockets'].includes(k));
    const app = uws.App().get('/*', (res) => {
      res.cork(() => {
        res.writeStatus('200 OK');
        for (const [k, v] of headers) res.writeHeader(k, v);
        res.end(body);
      });
    });
    const barePort = await new Promise<number>((resolve, reject) =>
      app.listen('127.0.0.1', 0, (sock) => {
        if (!sock) return reject(new Error('bare uWS cannot listen'));
        bare = sock;
        resolve(uws.us_socket_local_port(sock as unknown as uWS.us_socket));
      }),
    );
    const bareUrl = `http://127.0.0.1:${barePort}/v2/streams/${stream.id}`;
    log(`body ${body.length} B, ${headers.length} headers; ${rounds} rounds × ${seconds} s at ${conns} connections`);

    await wrk(bareUrl, 1, conns, null); // warm-up
    await wrk(url, 1, conns, acct.secretKey);
    await wrk(url, 1, conns, jwt);
    const got = { bare: [] as number[], key: [] as number[], jwt: [] as number[] };
    let bad = 0;
    for (let i = 0; i < rounds; i++) {
      for (const [name, u, t] of [['bare', bareUrl, null], ['key', url, acct.secretKey], ['jwt', url, jwt]] as const) {
        const r = await wrk(u, seconds, conns, t);
        bad += r.non2xx + r.errors;
        got[name].push(r.rps);
        log(`round ${i + 1} ${name}: ${Math.round(r.rps)} req/s${r.non2xx ? `, ${r.non2xx} non-2xx` : ''}`);
      }
    }
    const b = median(got.bare);
    const k = median(got.key);
    const j = median(got.jwt);
    const peer = { name: 'bare uWS, same bytes', value: Math.round(b) };
    const note = (x: number) => `${((x / b) * 100).toFixed(0)}% of bare (target ≥ 50%)${bad ? `; ${bad} non-2xx/socket errors` : ''}`;
    return [
      { group: GROUP, name: 'secret API key', value: Math.round(k), unit: 'req/s', peer, note: note(k) },
      { group: GROUP, name: 'OAuth JWT access token', value: Math.round(j), unit: 'req/s', peer, note: note(j) },
    ];
  } finally {
    if (bare) uws.us_listen_socket_close(bare);
    await srv.close();
    tmp.cleanup();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  for (const r of await run()) console.log(`${r.group} | ${r.name}: ${r.value} ${r.unit} vs ${r.peer?.name} ${r.peer?.value} — ${r.note ?? ''}`);
}
