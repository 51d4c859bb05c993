/**
 * Copying request data out of uWS's stack-allocated request (docs/architecture.md "uWS rules" 1: it is dead
 * once the route handler returns): path parameters, the method's name, the peer's address.
 */
import type uWS from 'uWebSockets.js';

export type HttpMethod = 'get' | 'post' | 'patch' | 'put' | 'del' | 'head' | 'options';

/** `'del'` → `'DELETE'`, `'get'` → `'GET'`. */
export const httpMethod = (m: HttpMethod) => (m === 'del' ? 'DELETE' : m.toUpperCase());

/** How many `:name` segments a uWS pattern has. */
export const paramCount = (pattern: string) => (pattern.match(/:/g) ?? []).length;

/** `decodeURIComponent`, or null for a malformed escape (which would otherwise throw inside uWS and end the process). */
export function safeDecode(s: string): string | null {
  if (!s.includes('%')) return s;
  try {
    return decodeURIComponent(s);
  } catch {
    return null;
  }
}

/**
 * The first `n` path parameters, percent-decoded; `bad` when one holds a malformed escape (that
 * one is kept raw). Call synchronously in the route handler.
 */
export function decodedParams(req: uWS.HttpRequest, n: number): { params: string[]; bad: boolean } {
  const params: string[] = [];
  let bad = false;
  for (let i = 0; i < n; i++) {
    const raw = req.getParameter(i) ?? '';
    const decoded = safeDecode(raw);
    if (decoded === null) bad = true;
    params.push(decoded ?? raw);
  }
  return { params, bad };
}

/**
 * The header a worker thread's forwarding proxy (./proxy.ts) sets to the client's socket address.
 * The main thread believes it only on its private unix socket, whose connections have no peer
 * address; on a TCP connection it is ignored (a client cannot claim another address with it).
 */
export const PEER_HEADER = 'x-skylark-peer';

/**
 * The socket peer's address as text (IPv6 in full form); for a request a worker thread forwarded
 * over the main thread's private unix socket (no peer address), the client address the worker saw
 * (`PEER_HEADER`). Call synchronously in the route handler (it reads `req`).
 */
export function remoteAddressOf(res: uWS.HttpResponse, req: uWS.HttpRequest): string {
  const peer = Buffer.from(res.getRemoteAddressAsText()).toString();
  return peer !== '' ? peer : req.getHeader(PEER_HEADER);
}

/** `remoteAddressOf` when the socket address was read already: `forwarded` is the request's `PEER_HEADER` value. */
export const peerOr = (socketPeer: string, forwarded: string) => (socketPeer !== '' ? socketPeer : forwarded);
