/**
 * Sends request bodies from a client in its own process (body-client-child.mjs): it keeps writing
 * while the server, in the test's process, answers — as a remote client does. (A client in the
 * server's own event loop cannot write while the server answers, which hides connection resets.)
 */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';

const CHILD = path.join(import.meta.dirname, 'body-client-child.mjs');

/** One request of the client process. */
export interface ClientRequest {
  url: string;
  method: string;
  headers: Record<string, string>;
  /** Body bytes; null: endless (until the server stops it). */
  total: number | null;
  /** Without `Content-Length` (Transfer-Encoding: chunked). */
  chunked: boolean;
  /** node:http (default), fetch with a Buffer body, or fetch with a stream body. */
  client?: 'http' | 'fetch' | 'fetch-stream';
  /** With `gapMs`: after this many bytes, 1 KiB every `gapMs` ms. */
  fastBytes?: number;
  gapMs?: number;
}

/** What the client saw of one request. */
export interface Outcome {
  status?: number;
  headers?: Record<string, string>;
  text?: string;
  /** The client's error (EPIPE, ECONNRESET) when it read no complete answer. */
  error?: string;
  /** Body bytes handed to the socket. */
  sent: number;
  /** Whether the request went over a socket used before (keep-alive). */
  reused?: boolean;
  /** From the request's start to its outcome (ms). */
  ms: number;
}

/** Sends `reqs` one after the other on one keep-alive agent; resolves with what the client saw of each. */
export async function sendFrom(reqs: ClientRequest[]): Promise<Outcome[]> {
  const { stdout } = await promisify(execFile)(process.execPath, [CHILD, JSON.stringify(reqs)], { timeout: 60_000, maxBuffer: 16 * 1024 * 1024 });
  return JSON.parse(stdout) as Outcome[];
}
