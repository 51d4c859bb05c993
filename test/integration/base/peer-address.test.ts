/**
 * Client addresses from the HTTP front's table (docs/http.md "Client addresses without a system
 * call"): requests from different loopback addresses (127.0.0.2–127.0.0.9, bound with
 * `localAddress`) are told apart by the held-request cap per client address (1 here), with no
 * proxy header; the addresses come from what `accept4` returned (`peerHits` grows), and a
 * descriptor closed and reused by a connection from another address is seen with the new one.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import http from 'node:http';
import type { ChildProcess } from 'node:child_process';
import { startInProcess, waitFor, type TestServer } from '../../helpers/server.js';
import { exited } from '../../helpers/publish.js';
import { liveHls } from '../../helpers/live-hls.js';
import { httpFrontCounts } from '../../../src/native/http-front.js';

let t: TestServer;
let pub: ChildProcess;
let mediaUrl = '';

beforeAll(async () => {
  t = await startInProcess({ SKYLARK_HTTP_MAX_HELD_PER_IP: '1' });
  const live = await liveHls(t, { title: 'Peers', latencyMode: 'low' }, 90);
  pub = live.pub;
  mediaUrl = live.mediaUrl.toString();
}, 60_000);

afterAll(async () => {
  pub?.kill('SIGKILL');
  if (pub) await exited(pub);
  await t?.close();
});

interface Held {
  /** The status once answered. */
  done: Promise<number>;
  /** Closes the connection (the server sees the client go away). */
  abort(): void;
}
/** A GET from `from` (a loopback address) on a connection of its own. */
function getFrom(url: string, from: string): Held {
  const agent = new http.Agent({ keepAlive: false });
  let req: http.ClientRequest;
  const done = new Promise<number>((resolve, reject) => {
    req = http.get(url, { localAddress: from, agent }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode!));
    });
    req.on('error', reject);
  });
  done.catch(() => {}); // an aborted or cut request is awaited (or not) by the test itself
  return { done, abort: () => req.destroy() };
}
/** The segment after the one in progress (two past the last listed, the farthest allowed): a blocking reload for it is held for 2–4 s. */
async function farMsn(): Promise<number> {
  const body = await (await fetch(mediaUrl)).text();
  const uri = /#EXT-X-PRELOAD-HINT:TYPE=PART,URI="([^"]+)"/.exec(body)![1]!;
  return Number(/^(\d+)\./.exec(uri)![1]) + 1;
}
const reloadUrl = (msn: number) => {
  const u = new URL(mediaUrl);
  u.searchParams.set('_HLS_msn', String(msn));
  return u.toString();
};
const refused = () => t.server.limits.count('http_held_per_ip' as never);
/** Waits until `n` refusals are counted (a worker thread's hits reach the main thread's count by message). */
const refusedReaches = (n: number) => waitFor(() => refused() >= n, 5_000, 50, `${n} refusals counted`);
/** LL-HLS requests the node holds now: the `skylark_hls_held_reloads` gauge (every HTTP thread's). */
async function heldNow(): Promise<number> {
  return (await t.server.metrics.registry.getSingleMetric('skylark_hls_held_reloads')!.get()).values[0]?.value ?? 0;
}
/** Waits until the requests `sent` reached the server: it holds `base` + those not answered yet. */
async function arrived(sent: Held[], base: number): Promise<void> {
  let answered = 0;
  for (const h of sent) h.done.then(() => answered++, () => answered++);
  await waitFor(async () => (await heldNow()) - base + answered >= sent.length, 10_000, 20, `${sent.length} requests at the server`);
}

describe('client addresses from accept4', () => {
  it('tells loopback addresses apart, and a reused descriptor carries its new address', async () => {
    const hits0 = httpFrontCounts().peerHits;
    const msn = await farMsn();
    const refused0 = refused();
    const base = await heldNow();
    // One held request per address: each of 127.0.0.2..5 is under its cap.
    const held = ['127.0.0.2', '127.0.0.3', '127.0.0.4', '127.0.0.5'].map((a) => getFrom(reloadUrl(msn), a));
    await arrived(held, base);
    expect(refused()).toBe(refused0);
    // A second one from 127.0.0.2 is over its cap.
    expect(await getFrom(reloadUrl(msn), '127.0.0.2').done).toBe(503);
    await refusedReaches(refused0 + 1);
    expect(refused()).toBe(refused0 + 1);
    expect(httpFrontCounts().peerHits).toBeGreaterThan(hits0);

    // The held connections go away; their descriptors are closed and reused by connections from
    // other addresses, which must each be seen with their own address (a stale one would be over
    // the cap of 127.0.0.2..5, still held by nobody now, or collide with each other).
    for (const h of held) h.abort();
    await Promise.allSettled(held.map((h) => h.done));
    await waitFor(async () => (await heldNow()) <= base, 10_000, 20, 'the slots given back');
    const msn2 = await farMsn();
    const again = ['127.0.0.6', '127.0.0.7', '127.0.0.8', '127.0.0.9'].map((a) => getFrom(reloadUrl(msn2), a));
    await arrived(again, base);
    expect(refused()).toBe(refused0 + 1);
    // Each of those addresses is at its cap now, and 127.0.0.2 is free again.
    expect(await getFrom(reloadUrl(msn2), '127.0.0.7').done).toBe(503);
    await refusedReaches(refused0 + 2);
    expect(refused()).toBe(refused0 + 2);
    const two = getFrom(reloadUrl(msn2), '127.0.0.2');
    await arrived([...again, two], base);
    expect(refused()).toBe(refused0 + 2);
    for (const s of await Promise.all([...again, two].map((h) => h.done))) expect(s).toBe(200);
  }, 30_000);
});
