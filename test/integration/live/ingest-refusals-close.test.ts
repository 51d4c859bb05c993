/**
 * Refused connections never hold a slot (docs/icecast.md "Refusals"): on the Icecast port and on
 * the RTMP port, a client that is refused (or answered once, `updinfo`) and then neither closes
 * nor sends anything that matters is disconnected by the server within 5 s; on the Icecast port
 * its per-address slot is given back as soon as the refusal is written, so 12 refused clients
 * from one address (the cap is 10) still leave room for a good source.
 *
 * The clients are "stubborn": `allowHalfOpen`, they never end their side; once the server's FIN
 * arrived they keep writing a byte every 200 ms, which a server still holding the socket reads
 * and drops and a server that destroyed it answers with a reset (the client's 'close').
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import net from 'node:net';
import { randomBytes } from 'node:crypto';
import { api, startInProcess, waitFor, type TestServer } from '../../helpers/server.js';
import { exited, publish } from '../../helpers/publish.js';

let t: TestServer;

interface Stubborn {
  /** What the server sent before its FIN. */
  answer: Promise<string>;
  /** Resolves when the server destroyed the connection (the client saw 'close'). */
  closed: Promise<void>;
  isClosed(): boolean;
  destroy(): void;
}

/** Connects, sends `first` (and `then(sock, data)` on each reply), never closes; probes once the server's FIN arrived. */
function stubborn(port: number, first: Buffer | string, then?: (sock: net.Socket, got: Buffer) => void): Stubborn {
  const sock = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true }, () => sock.write(first));
  const chunks: Buffer[] = [];
  let closed = false;
  let probe: NodeJS.Timeout | null = null;
  let resolveAnswer!: (s: string) => void;
  const answer = new Promise<string>((r) => (resolveAnswer = r));
  sock.on('data', (d: Buffer) => {
    chunks.push(d);
    then?.(sock, Buffer.concat(chunks));
  });
  sock.on('end', () => {
    resolveAnswer(Buffer.concat(chunks).toString('latin1'));
    probe = setInterval(() => {
      if (!sock.destroyed) sock.write('x');
    }, 200);
  });
  sock.on('error', () => {});
  const closedP = new Promise<void>((r) =>
    sock.on('close', () => {
      closed = true;
      if (probe) clearInterval(probe);
      resolveAnswer(Buffer.concat(chunks).toString('latin1'));
      r();
    }),
  );
  return { answer, closed: closedP, isClosed: () => closed, destroy: () => sock.destroy() };
}

/** Resolves true when `p` settled within `ms`, else false. */
function within(p: Promise<unknown>, ms: number): Promise<boolean> {
  return Promise.race([p.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms).unref())]);
}

const auth = (key: string) => `Basic ${Buffer.from(`source:${key}`).toString('base64')}`;

beforeAll(async () => {
  t = await startInProcess({ SKYLARK_ABR_LADDER: '0' });
});
afterAll(async () => {
  await t?.close();
});

describe('Icecast port refusals', () => {
  it('every refusal (400, 401, 404, 405, 415, 431) and one-off answer (updinfo, status JSON) is closed by the server within 5 s', async () => {
    const port = t.server.icecastPort;
    const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'R', codec: 'mp3', quality: 'medium', reconnectWindow: 0 })).json as { id: string; streamKey: string };
    const requests: Array<[string, RegExp]> = [
      ['garbage\r\n\r\n', /^HTTP\/1\.0 400/],
      [`PUT /live/${s.id} HTTP/1.1\r\nAuthorization: ${auth('sk_wrong')}\r\nContent-Type: audio/mpeg\r\n\r\n`, /^HTTP\/1\.0 401/],
      [`GET /live/stm_unknown HTTP/1.0\r\n\r\n`, /^HTTP\/1\.0 404/],
      [`DELETE /live/${s.id} HTTP/1.1\r\n\r\n`, /^HTTP\/1\.0 405/],
      [`PUT /live/${s.id} HTTP/1.1\r\nAuthorization: ${auth(s.streamKey)}\r\nContent-Type: audio/ogg\r\n\r\n`, /^HTTP\/1\.0 415/],
      [`GET / HTTP/1.1\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`, /^HTTP\/1\.0 431/],
      [`GET /admin/metadata?mount=/live/${s.id}&mode=updinfo&song=x HTTP/1.0\r\nAuthorization: ${auth('sk_wrong')}\r\n\r\n`, /^HTTP\/1\.0 401/],
      [`GET /admin/metadata?mount=/live/${s.id}&mode=updinfo&song=x HTTP/1.0\r\nAuthorization: ${auth(s.streamKey)}\r\n\r\n`, /^HTTP\/1\.0 200/],
      [`GET /status-json.xsl HTTP/1.0\r\n\r\n`, /^HTTP\/1\.0 200/],
      [`HEAD /live/stm_unknown HTTP/1.1\r\n\r\n`, /^HTTP\/1\.0 404/],
      ['garbage again\r\n\r\n', /^HTTP\/1\.0 400/],
      // A valid key on an unknown mount: 404 naming it (docs/icecast.md "Mounts").
      [`SOURCE /elsewhere HTTP/1.0\r\nAuthorization: ${auth(s.streamKey)}\r\n\r\n`, /^HTTP\/1\.0 404/],
    ];
    const clients = requests.map(([req]) => stubborn(port, req));
    try {
      const answers = await Promise.all(clients.map((c) => c.answer));
      answers.forEach((a, i) => expect(a).toMatch(requests[i]![1]));
      const results = await Promise.all(clients.map((c) => within(c.closed, 8000)));
      expect(results).toEqual(Array(12).fill(true));
    } finally {
      for (const c of clients) c.destroy();
    }
  }, 30_000);

  it('12 refused clients still connected from one address hold no slot: a 13th connection is a good source (200 OK)', async () => {
    const port = t.server.icecastPort;
    const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'R2', codec: 'mp3', quality: 'medium', reconnectWindow: 0 })).json as { id: string; streamKey: string };
    const refused = Array.from({ length: 12 }, () => stubborn(port, 'garbage\r\n\r\n'));
    try {
      for (const a of await Promise.all(refused.map((c) => c.answer))) expect(a).toMatch(/^HTTP\/1\.0 400/);
      const head = await new Promise<string>((resolve, reject) => {
        const sock = net.connect(port, '127.0.0.1', () => sock.write(`PUT /live/${s.id} HTTP/1.1\r\nAuthorization: ${auth(s.streamKey)}\r\nContent-Type: audio/mpeg\r\n\r\n`));
        let got = '';
        sock.on('data', (d) => {
          got += d.toString('latin1');
          if (got.includes('\r\n\r\n')) {
            sock.destroy();
            resolve(got);
          }
        });
        sock.on('error', reject);
        sock.on('close', () => resolve(got));
      });
      expect(head).toMatch(/^HTTP\/1\.0 200 OK/);
    } finally {
      for (const c of refused) c.destroy();
    }
  });
});

// ── A minimal RTMP client: handshake, connect, createStream, publish (AMF0) ──
function amf(v: string | number | null | Record<string, string>): Buffer {
  if (v === null) return Buffer.from([0x05]);
  if (typeof v === 'number') {
    const b = Buffer.alloc(9);
    b.writeDoubleBE(v, 1);
    return b;
  }
  if (typeof v === 'string') {
    const s = Buffer.from(v, 'utf8');
    const h = Buffer.from([0x02, 0, 0]);
    h.writeUInt16BE(s.length, 1);
    return Buffer.concat([h, s]);
  }
  const parts: Buffer[] = [Buffer.from([0x03])];
  for (const [k, val] of Object.entries(v)) {
    const key = Buffer.from(k, 'utf8');
    const kl = Buffer.alloc(2);
    kl.writeUInt16BE(key.length);
    parts.push(kl, key, amf(val));
  }
  parts.push(Buffer.from([0, 0, 0x09]));
  return Buffer.concat(parts);
}

/** One command message (type 20): a type-0 chunk, then type-3 continuations every 128 bytes (the default chunk size). */
function command(csid: number, streamId: number, ...values: Array<string | number | null | Record<string, string>>): Buffer {
  const body = Buffer.concat(values.map(amf));
  const h = Buffer.alloc(12);
  h[0] = csid;
  h.writeUIntBE(body.length, 4, 3);
  h[7] = 20;
  h.writeUInt32LE(streamId, 8);
  const out: Buffer[] = [h];
  for (let o = 0; o < body.length; o += 128) {
    if (o > 0) out.push(Buffer.from([0xc0 | csid]));
    out.push(body.subarray(o, o + 128));
  }
  return Buffer.concat(out);
}

describe('RTMP port refusals', () => {
  it('a refused publish is closed by the server even if the client never closes; a good publisher still connects', async () => {
    const rtmpPort = t.server.rtmpPort;
    const s = (await api(t.http, t.secretKey, 'POST', '/v2/streams', { title: 'RTMP', codec: 'aac', quality: 'medium', reconnectWindow: 0 })).json as { id: string; streamKey: string; rtmpUrl: string };
    const badPublisher = () => {
      let phase = 0;
      return stubborn(rtmpPort, Buffer.concat([Buffer.from([3]), Buffer.alloc(8), randomBytes(1528)]), (sock, got) => {
        if (phase === 0 && got.length >= 1 + 1536 + 1536) {
          phase = 1;
          sock.write(got.subarray(1, 1537)); // C2 echoes S1
          sock.write(command(3, 0, 'connect', 1, { app: `live/${s.id}`, type: 'nonprivate', tcUrl: `rtmp://127.0.0.1/live/${s.id}` }));
          sock.write(command(3, 0, 'createStream', 2, null));
          sock.write(command(4, 1, 'publish', 3, null, 'sk_euw1_wrong', 'live'));
        }
      });
    };
    // Two waves of 6 (the cap per address is 10: a 7th at once would be refused at accept).
    for (let wave = 0; wave < 2; wave++) {
      const clients = Array.from({ length: 6 }, badPublisher);
      try {
        const answers = await Promise.all(clients.map((c) => c.answer));
        for (const a of answers) expect(a).toContain('NetStream.Publish.BadName');
        const results = await Promise.all(clients.map((c) => within(c.closed, 8000)));
        expect(results).toEqual(Array(6).fill(true));
      } finally {
        for (const c of clients) c.destroy();
      }
    }
    // A good publisher from the same address (the cap per address is 10) goes live.
    const pub = publish(`${s.rtmpUrl}/${s.streamKey}`, { seconds: 4 });
    await waitFor(async () => (await api(t.http, t.secretKey, 'GET', `/v2/streams/${s.id}`)).json.status === 'live', 15_000, 100, 'live');
    expect(await exited(pub)).toBe(0);
  }, 40_000);
});
