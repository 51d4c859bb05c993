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
