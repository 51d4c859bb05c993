/**
 * Copying request data out of uWS's stack-allocated request (uWS rule 1, STYLE.md: it is dead
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

/** The socket peer's address as text (IPv6 in full form). Only while the response is alive. */
export const remoteAddressOf = (res: uWS.HttpResponse) => Buffer.from(res.getRemoteAddressAsText()).toString();
