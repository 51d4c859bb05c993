/**
 * One delivery attempt over HTTP (docs/behaviour.md §6): a POST with the signed body,
 * redirects not followed (a 3xx is a failed attempt), a hard timeout (default 10 s for the response
 * head; the body is then drained within what is left of it), and the response body kept only up to
 * a small cap (the rest is discarded, and beyond `drainCapBytes` the connection is dropped).
 * Private destinations are refused after DNS resolution through `guardedLookup`.
 */
import http from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import { DESTINATION_NOT_ALLOWED, guardedLookup, isPrivateAddress } from './destination.js';

/** What an attempt produced. `status` is null when no response arrived; `error` names why it failed. */
export interface PostResult {
  status: number | null;
  error: string | null;
  /** The first bytes of the response body (UTF-8, at most `keepBodyBytes`). */
  body: string | null;
}

export interface PostOptions {
  url: string;
  headers: Record<string, string>;
  /** The request body; sent with `Content-Length` (a GET sends none). */
  body: string;
  /** Default POST; GET for feed-update notifiers (docs/podcasts.md "Feed-update notifications"). */
  method?: 'GET' | 'POST';
  /** Agent of the endpoint (keep-alive; one per endpoint so endpoints never share sockets). */
  agent: http.Agent;
  timeoutMs: number;
  allowPrivate: boolean;
  keepBodyBytes?: number;
  drainCapBytes?: number;
}

/** Response bytes stored with an attempt. */
export const KEEP_BODY_BYTES = 1024;
/** Response bytes read at most before the connection is dropped. */
export const DRAIN_CAP_BYTES = 64 * 1024;

/** Makes the keep-alive agent of one endpoint: at most `maxSockets` connections. */
export function endpointAgent(url: string, maxSockets: number): http.Agent {
  const opts = { keepAlive: true, maxSockets, maxFreeSockets: maxSockets, scheduling: 'lifo' as const, timeout: 30_000 };
  return url.startsWith('https:') ? new https.Agent(opts) : new http.Agent(opts);
}

/** POSTs (or GETs, `o.method`) once. Never throws: every failure is a `PostResult` with `error`. */
export function postOnce(o: PostOptions): Promise<PostResult> {
  const keep = o.keepBodyBytes ?? KEEP_BODY_BYTES;
  const cap = o.drainCapBytes ?? DRAIN_CAP_BYTES;
  return new Promise((resolve) => {
    let settled = false;
    let status: number | null = null;
    const chunks: Buffer[] = [];
    let kept = 0;
    const finish = (error: string | null) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      const body = chunks.length ? Buffer.concat(chunks).subarray(0, keep).toString('utf8') : null;
      resolve({ status, error, body });
    };
    let u: URL;
    try {
      u = new URL(o.url);
    } catch {
      return resolve({ status: null, error: 'invalid_url', body: null });
    }
    const host = u.hostname.replace(/^\[|\]$/g, '');
    if (!o.allowPrivate && isIP(host) && isPrivateAddress(host)) return resolve({ status: null, error: DESTINATION_NOT_ALLOWED, body: null });
    const mod = u.protocol === 'https:' ? https : http;
    const method = o.method ?? 'POST';
    const payload = method === 'GET' ? null : Buffer.from(o.body, 'utf8');
    const req = mod.request(u, {
      method,
      agent: o.agent,
      headers: payload ? { ...o.headers, 'Content-Length': String(payload.length) } : o.headers,
      lookup: guardedLookup(o.allowPrivate),
    });
    const timer = setTimeout(() => {
      req.destroy();
      finish(status === null ? 'timeout' : outcome());
    }, o.timeoutMs);
    req.on('response', (res) => {
      status = res.statusCode ?? null;
      let read = 0;
      res.on('data', (c: Buffer) => {
        read += c.length;
        if (kept < keep) {
          chunks.push(c);
          kept += c.length;
        }
        if (read > cap) {
          res.destroy();
          req.destroy();
          finish(outcome());
        }
      });
      res.on('end', () => finish(outcome()));
      res.on('error', () => finish(outcome()));
      res.on('aborted', () => finish(outcome()));
    });
    req.on('error', (e: NodeJS.ErrnoException) => finish(status === null ? errorCode(e) : outcome()));
    if (payload) req.end(payload);
    else req.end();

    /** A 3xx is not followed; any other non-2xx is the receiver's refusal. */
    function outcome(): string | null {
      if (status === null) return 'no_response';
      if (status >= 200 && status < 300) return null;
      if (status >= 300 && status < 400) return 'redirect_not_followed';
      return `http_${status}`;
    }
  });
}

function errorCode(e: NodeJS.ErrnoException): string {
  if (e.code === DESTINATION_NOT_ALLOWED) return DESTINATION_NOT_ALLOWED;
  if (e.code === 'ECONNREFUSED') return 'connection_refused';
  if (e.code === 'ECONNRESET') return 'connection_reset';
  if (e.code === 'ENOTFOUND' || e.code === 'EAI_AGAIN') return 'dns_failure';
  if (e.code?.startsWith('ERR_TLS') || e.code?.includes('CERT')) return 'tls_error';
  return e.code ? e.code.toLowerCase() : 'network_error';
}
