/**
 * The request head of an Icecast source client (RFC 9112 §2–§5 as Icecast 2.4 takes it): one
 * request line and its header fields, parsed from the bytes a source connection sends before its
 * audio. Sans-I/O: `HeadReader.push` takes socket bytes and says whether the head is complete;
 * what follows it is the body (the audio stream). Limits are named constants; a head that breaks
 * one is refused, never buffered further. The answers are plain HTTP/1.0 heads (`response`).
 */

/** Largest request head taken (bytes): request line + header fields + the empty line. */
export const MAX_HEAD_BYTES = 16 * 1024;
/** Most header fields taken. */
export const MAX_HEADER_FIELDS = 64;

/** A parsed request head. Header names are lower case; repeated fields are joined with ", ". */
export interface RequestHead {
  method: string;
  /** The request target as sent (path and query). */
  target: string;
  /** `HTTP/1.0` or `HTTP/1.1`. */
  version: string;
  headers: Map<string, string>;
}

/** What `HeadReader.push` found. */
export type HeadResult =
  | { kind: 'more' }
  | { kind: 'head'; head: RequestHead; /** Bytes after the head (the start of the body). */ rest: Buffer }
  | { kind: 'error'; status: 400 | 431; reason: string };

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/** Accumulates the bytes of one request head (at most MAX_HEAD_BYTES) and parses it. */
export class HeadReader {
  private chunks: Buffer[] = [];
  private size = 0;

  /** Feeds socket bytes; once the head is complete it is parsed (later pushes are not expected). */
  push(data: Buffer): HeadResult {
    this.chunks.push(data);
    this.size += data.length;
    const all = this.chunks.length === 1 ? data : Buffer.concat(this.chunks, this.size);
    this.chunks = [all];
    const end = all.indexOf('\r\n\r\n');
    if (end < 0) {
      // A client that ends lines with a bare LF (some old source clients) is taken too.
      const lf = all.indexOf('\n\n');
      if (lf >= 0) return this.parse(all.subarray(0, lf).toString('latin1'), all.subarray(lf + 2));
      return this.size > MAX_HEAD_BYTES ? { kind: 'error', status: 431, reason: 'request head too large' } : { kind: 'more' };
    }
    if (end + 4 > MAX_HEAD_BYTES) return { kind: 'error', status: 431, reason: 'request head too large' };
    return this.parse(all.subarray(0, end).toString('latin1'), all.subarray(end + 4));
  }

  private parse(text: string, rest: Buffer): HeadResult {
    const lines = text.split(/\r?\n/);
    const m = /^([A-Z]+) (\S+) (HTTP\/1\.[01])$/.exec(lines[0] ?? '');
    if (!m) return { kind: 'error', status: 400, reason: 'malformed request line' };
    if (lines.length - 1 > MAX_HEADER_FIELDS) return { kind: 'error', status: 431, reason: 'too many header fields' };
    const headers = new Map<string, string>();
    for (let i = 1; i < lines.length; i++) {
      const line = lines[i]!;
      const colon = line.indexOf(':');
      const name = colon > 0 ? line.slice(0, colon) : '';
      if (!TOKEN.test(name)) return { kind: 'error', status: 400, reason: 'malformed header field' };
      const key = name.toLowerCase();
      const value = line.slice(colon + 1).trim();
      const had = headers.get(key);
      headers.set(key, had === undefined ? value : `${had}, ${value}`);
    }
    return { kind: 'head', head: { method: m[1]!, target: m[2]!, version: m[3]!, headers }, rest };
  }
}

/**
 * The user and password of an HTTP Basic `Authorization` value (RFC 7617), or null. The password
 * may contain ':' (only the first one separates).
 */
export function basicCredentials(authorization: string | undefined): { user: string; password: string } | null {
  if (!authorization) return null;
  const m = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(authorization);
  if (!m) return null;
  const decoded = Buffer.from(m[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) return null;
  return { user: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}

/** Which ingest codec a source's `Content-Type` names (docs/behaviour.md §10), or null for anything else. */
export function codecOfContentType(contentType: string | undefined): 'mp3' | 'aac' | 'opus' | null {
  const t = (contentType ?? '').split(';')[0]!.trim().toLowerCase();
  if (t === 'audio/mpeg' || t === 'audio/mp3') return 'mp3';
  if (t === 'audio/aac' || t === 'audio/aacp' || t === 'audio/x-aac') return 'aac';
  if (t === 'audio/ogg' || t === 'application/ogg' || t === 'audio/opus') return 'opus';
  return null;
}

/**
 * The body of a `Transfer-Encoding: chunked` request (RFC 9112 §7.1), de-chunked as it arrives.
 * Chunk extensions and trailers are skipped; a chunk-size line over 1 KiB or malformed is an error.
 */
export class Dechunker {
  private state: 'size' | 'data' | 'data-end' | 'trailer' | 'done' = 'size';
  private line = '';
  private left = 0;

  /** Feeds bytes; returns the body bytes they carried (views), or an error. `done` after the last chunk. */
  push(data: Buffer): { out: Buffer[]; done: boolean } | { error: string } {
    const out: Buffer[] = [];
    let i = 0;
    while (i < data.length && this.state !== 'done') {
      if (this.state === 'data') {
        const n = Math.min(this.left, data.length - i);
        out.push(data.subarray(i, i + n));
        i += n;
        this.left -= n;
        if (this.left === 0) this.state = 'data-end';
        continue;
      }
      const nl = data.indexOf(0x0a, i);
      const end = nl < 0 ? data.length : nl;
      this.line += data.subarray(i, end).toString('latin1');
      if (this.line.length > 1024) return { error: 'chunk line too long' };
      i = nl < 0 ? data.length : nl + 1;
      if (nl < 0) break;
      const line = this.line.replace(/\r$/, '');
      this.line = '';
      if (this.state === 'data-end') {
        if (line !== '') return { error: 'missing CRLF after a chunk' };
        this.state = 'size';
      } else if (this.state === 'size') {
        const m = /^([0-9A-Fa-f]{1,8})(;.*)?$/.exec(line);
        if (!m) return { error: 'malformed chunk size' };
        this.left = parseInt(m[1]!, 16);
        this.state = this.left === 0 ? 'trailer' : 'data';
      } else if (line === '') this.state = 'done'; // trailer fields end with an empty line
    }
    return { out, done: this.state === 'done' };
  }
}

/**
 * The parameters of a query string (without `?`, read as Latin-1 like the whole request head) as
 * raw bytes: `+` is a space and `%XX` a byte
 * (RFC 3986 §2.1; HTML's form encoding), nothing decoded as text yet — Icecast's admin calls send
 * their text in the charset `charset=` names. A malformed `%` escape is kept as it is. The first
 * occurrence of a name wins; names are compared as Latin-1 text.
 */
export function queryBytes(query: string): Map<string, Buffer> {
  const out = new Map<string, Buffer>();
  for (const pair of query.split('&')) {
    if (pair === '') continue;
    const eq = pair.indexOf('=');
    const name = percentBytes(eq < 0 ? pair : pair.slice(0, eq)).toString('latin1');
    if (!out.has(name)) out.set(name, percentBytes(eq < 0 ? '' : pair.slice(eq + 1)));
  }
  return out;
}

function percentBytes(s: string): Buffer {
  const bytes: number[] = [];
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 0x25 && /^[0-9A-Fa-f]{2}$/.test(s.slice(i + 1, i + 3))) {
      bytes.push(parseInt(s.slice(i + 1, i + 3), 16));
      i += 2;
    } else if (c === 0x2b) bytes.push(0x20);
    else bytes.push(c & 0xff); // the head is read as Latin-1: one character per byte sent
  }
  return Buffer.from(bytes);
}

/** The charsets `updinfo` takes (`charset=`), by their lower-case names and aliases. */
const CHARSETS: Record<string, 'utf-8' | 'iso-8859-1' | 'windows-1252'> = {
  'utf-8': 'utf-8',
  utf8: 'utf-8',
  'iso-8859-1': 'iso-8859-1',
  'iso8859-1': 'iso-8859-1',
  latin1: 'iso-8859-1',
  'latin-1': 'iso-8859-1',
  'windows-1252': 'windows-1252',
  cp1252: 'windows-1252',
};

/**
 * Text of `bytes` in `charset` as Icecast's `updinfo` takes it: `ISO-8859-1` (each byte one code
 * point, RFC 1345's table), `Windows-1252` (WHATWG Encoding's table: 0x80–0x9F are `€`, `‘` …) or
 * `UTF-8` (invalid sequences become U+FFFD). Without a charset: UTF-8 when the bytes are valid
 * UTF-8, else ISO-8859-1. Names are matched without case.
 * @throws RangeError "unsupported charset" for any other charset name
 */
export function decodeCharset(bytes: Uint8Array, charset: string | null): string {
  if (charset === null || charset === '') {
    try {
      return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    } catch {
      return Buffer.from(bytes).toString('latin1');
    }
  }
  const cs = CHARSETS[charset.trim().toLowerCase()];
  if (cs === undefined) throw new RangeError(`unsupported charset '${charset.slice(0, 40)}'`);
  if (cs === 'iso-8859-1') return Buffer.from(bytes).toString('latin1');
  if (cs === 'windows-1252') {
    // Node's TextDecoder('windows-1252') decodes as ISO-8859-1: the 0x80–0x9F row is mapped here.
    let out = '';
    for (const b of bytes) out += b >= 0x80 && b <= 0x9f ? CP1252_80[b - 0x80]! : String.fromCharCode(b);
    return out;
  }
  return new TextDecoder('utf-8').decode(bytes);
}

/** Windows-1252's 0x80–0x9F (WHATWG Encoding's index; its five unassigned bytes as the C1 control of the same value). */
const CP1252_80 = [...'\u20ac\u0081\u201a\u0192\u201e\u2026\u2020\u2021\u02c6\u2030\u0160\u2039\u0152\u008d\u017d\u008f\u0090\u2018\u2019\u201c\u201d\u2022\u2013\u2014\u02dc\u2122\u0161\u203a\u0153\u009d\u017e\u0178'];

/** A request path as it may go into a log line or an answer: at most 80 characters, printable ASCII. */
export function printable(path: string): string {
  return path.slice(0, 80).replace(/[^\x21-\x7e]/g, '?');
}

/** A plain response head (HTTP/1.0 like Icecast: the connection closes after it). */
export function response(status: string, headers: Record<string, string> = {}, body = ''): string {
  let h = `HTTP/1.0 ${status}\r\nServer: Skylark\r\nConnection: Close\r\nCache-Control: no-cache, no-store\r\n`;
  for (const k in headers) h += `${k}: ${headers[k]}\r\n`;
  if (body) h += `${'Content-Type' in headers ? '' : 'Content-Type: text/plain; charset=utf-8\r\n'}Content-Length: ${Buffer.byteLength(body)}\r\n`;
  return `${h}\r\n${body}`;
}
