/** Small HTTP helpers for the load benches: a GET that checks status and bytes, and the raw header size of a response. */
import net from 'node:net';

/** GET `url`; the status and the body bytes. Bounded by `timeoutMs`. */
export async function get(url: string, timeoutMs = 5000): Promise<{ status: number; body: Uint8Array; headers: Headers }> {
  const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
  return { status: res.status, body: new Uint8Array(await res.arrayBuffer()), headers: res.headers };
}

/** Equal bytes. */
export function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.byteLength === b.byteLength && Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));
}

/** Why `url` does not answer 200 with exactly `expected`, or null when it does. */
export async function checkServes(url: string, expected: Uint8Array): Promise<string | null> {
  try {
    const r = await get(url);
    if (r.status !== 200) return `${url} answered ${r.status}`;
    if (!sameBytes(r.body, expected)) return `${url} answered ${r.body.byteLength} B that differ from the expected ${expected.byteLength} B`;
    return null;
  } catch (e) {
    return `${url}: ${(e as Error).message}`;
  }
}

/**
 * The response to a keep-alive `GET` exactly as a client like wrk reads it: header bytes (status
 * line through the blank line) and body bytes. Needs a Content-Length response.
 */
export function rawResponseSize(url: string, timeoutMs = 5000): Promise<{ headerBytes: number; bodyBytes: number; head: string }> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const sock = net.connect(Number(u.port), u.hostname);
    const chunks: Buffer[] = [];
    let size = 0;
    const timer = setTimeout(() => {
      sock.destroy();
      reject(new Error(`no full response from ${url} in ${timeoutMs} ms`));
    }, timeoutMs);
    sock.on('connect', () => sock.write(`GET ${u.pathname}${u.search} HTTP/1.1\r\nHost: ${u.host}\r\n\r\n`));
    sock.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    sock.on('data', (d: Buffer) => {
      chunks.push(d);
      size += d.length;
      const all = Buffer.concat(chunks, size);
      const end = all.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = all.subarray(0, end + 4).toString('latin1');
      const m = /\r\ncontent-length:\s*(\d+)/i.exec(head);
      if (!m) {
        clearTimeout(timer);
        sock.destroy();
        return reject(new Error(`${url}: response without Content-Length`));
      }
      if (size >= end + 4 + Number(m[1])) {
        clearTimeout(timer);
        sock.destroy();
        resolve({ headerBytes: end + 4, bodyBytes: Number(m[1]), head: head.trim() });
      }
    });
  });
}
