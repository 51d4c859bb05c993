// The client process of test/integration/base/body-client.ts: it sends request bodies while the server
// (in the test's process) answers, as a client on another machine would, and prints what it saw
// as one JSON line.
//
// argv[2]: JSON array of requests, sent one after the other on one keep-alive agent:
//   { url, method, headers, total (bytes; null = endless), chunked, client: 'http' | 'fetch' | 'fetch-stream',
//     fastBytes?, gapMs? (after fastBytes: 1 KiB every gapMs ms), piece? (bytes, default 64 KiB) }
// stdout: JSON array of { status?, headers?, text?, error?, sent, reused?, ms }.
import http from 'node:http';

const PIECE = 64 * 1024;
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });

function viaHttp(r) {
  return new Promise((resolve) => {
    const u = new URL(r.url);
    const total = r.total ?? Infinity;
    const out = { sent: 0 };
    const headers = { ...r.headers };
    if (!r.chunked) headers['Content-Length'] = total;
    const req = http.request({ host: u.hostname, port: u.port, method: r.method, path: u.pathname + u.search, headers, agent });
    let settled = false;
    const settle = () => {
      if (settled) return;
      settled = true;
      resolve(out);
    };
    req.on('response', (res) => {
      out.status = res.statusCode;
      out.headers = res.headers;
      out.reused = req.reusedSocket;
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (text += d));
      res.on('end', () => {
        out.text = text;
        settle();
      });
      res.on('error', (e) => {
        out.text = text;
        out.error = e.code ?? e.message;
        settle();
      });
    });
    req.on('error', (e) => {
      out.error = e.code ?? e.message;
      settle();
    });
    const piece = Buffer.alloc(r.piece ?? PIECE, 0x20); // spaces: a JSON body that is only too long
    const pump = () => {
      while (!req.destroyed && !settled && out.sent < total) {
        const slow = r.gapMs !== undefined && out.sent >= (r.fastBytes ?? 0);
        const n = Math.min(slow ? 1024 : piece.length, total - out.sent);
        out.sent += n;
        const more = req.write(n === piece.length ? piece : piece.subarray(0, n));
        if (slow) return void setTimeout(pump, r.gapMs);
        if (!more) return void req.once('drain', pump);
      }
      if (!req.destroyed && !settled && out.sent >= total) req.end();
    };
    pump();
  });
}

async function viaFetch(r) {
  const body = Buffer.alloc(r.total, 0x20);
  const init = { method: r.method, headers: r.headers };
  if (r.client === 'fetch-stream') {
    init.body = new ReadableStream({
      start(c) {
        for (let i = 0; i < body.length; i += PIECE) c.enqueue(body.subarray(i, i + PIECE));
        c.close();
      },
    });
    init.duplex = 'half';
  } else init.body = body;
  try {
    const res = await fetch(r.url, init);
    return { status: res.status, headers: Object.fromEntries(res.headers), text: await res.text(), sent: r.total };
  } catch (e) {
    return { error: String(e.cause?.code ?? e.cause ?? e), sent: 0 };
  }
}

const out = [];
for (const r of JSON.parse(process.argv[2])) {
  const t0 = Date.now();
  const o = r.client === 'fetch' || r.client === 'fetch-stream' ? await viaFetch(r) : await viaHttp(r);
  o.ms = Date.now() - t0;
  out.push(o);
}
agent.destroy();
process.stdout.write(JSON.stringify(out) + '\n');
