import net from 'node:net';
/** HTTP/1.1 responses read off a raw socket, for tests that check the bytes on the wire. */

/** One response: status code, headers by lower-case name, body. */
export interface ParsedResponse {
  status: number;
  headers: Map<string, string>;
  body: Buffer;
}

/**
 * Splits `data` into the whole HTTP/1.1 responses it holds, framed by Content-Length (`head`: the
 * answers to HEAD, which carry no body). A response still arriving (its head or body cut short)
 * is left out, so a reader can call this again as bytes arrive.
 */
export function parseResponses(data: Buffer, head = false): ParsedResponse[] {
  const out: ParsedResponse[] = [];
  let at = 0;
  while (at < data.length) {
    const end = data.indexOf('\r\n\r\n', at);
    if (end < 0) break;
    const lines = data.subarray(at, end).toString('latin1').split('\r\n');
    const headers = new Map(lines.slice(1).map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()] as const));
    const length = head ? 0 : Number(headers.get('content-length'));
    if (end + 4 + length > data.length) break;
    out.push({ status: Number(lines[0]!.split(' ')[1]), headers, body: data.subarray(end + 4, end + 4 + length) });
    at = end + 4 + length;
  }
  return out;
}

/** A raw keep-alive connection to 127.0.0.1:`port` that sends requests and reads whole responses in order. */
export class RawConn {
  private readonly s: net.Socket;
  private buf = Buffer.alloc(0);
  private waiting: Array<() => void> = [];
  closed = false;
  constructor(port: number) {
    this.s = net.connect(port, '127.0.0.1');
    this.s.on('data', (d: Buffer) => {
      this.buf = Buffer.concat([this.buf, d]);
      for (const w of this.waiting.splice(0)) w();
    });
    this.s.on('close', () => {
      this.closed = true;
      for (const w of this.waiting.splice(0)) w();
    });
    this.s.on('error', () => {});
  }
  send(raw: string): void {
    this.s.write(raw);
  }
  /** The next `n` responses (`head`: answers to HEAD, no bodies). @throws when the connection closes first or after `ms` */
  async responses(n: number, head = false, ms = 15_000): Promise<ParsedResponse[]> {
    const deadline = Date.now() + ms;
    for (;;) {
      const got = parseResponses(this.buf, head);
      if (got.length >= n) {
        const taken = got.slice(0, n);
        // Drop the bytes of the responses taken.
        let at = 0;
        for (const r of taken) at = this.buf.indexOf('\r\n\r\n', at) + 4 + (head ? 0 : r.body.length);
        this.buf = this.buf.subarray(at);
        return taken;
      }
      if (this.closed) throw new Error(`closed after ${got.length} of ${n} responses`);
      if (Date.now() > deadline) throw new Error('timed out');
      await new Promise<void>((r) => {
        this.waiting.push(r);
        setTimeout(r, 200);
      });
    }
  }
  /** The next response. @throws when the connection closes first or after `ms` */
  async response(ms = 20_000): Promise<ParsedResponse> {
    return (await this.responses(1, false, ms))[0]!;
  }
  end(): void {
    this.s.destroy();
  }
}
