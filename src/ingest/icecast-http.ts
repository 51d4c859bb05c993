/**
 * The request head of an Icecast source client (RFC 9112 §2–§5 as Icecast 2.4 takes it): one
 * request line and its header fields, parsed from the bytes a source connection sends before its
 * audio. Sans-I/O: `HeadReader.push` takes socket bytes and says whether the head is complete;
 * what follows it is the body (the audio stream). Limits are named constants; a head that breaks
 * one is refused, never buffered further.
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

/** Which ingest codec a source's `Content-Type` names (PRODUCT.md §10), or null for anything else. */
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
