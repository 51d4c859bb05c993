/**
 * Signing webhook payloads off the main thread (docs/behaviour.md §6: "Signing runs in Piscina workers").
 * Requests made in the same turn of the event loop are batched into one Piscina task (up to
 * `maxBatch`), so the per-task messaging cost is paid once per burst, not once per delivery.
 * The worker is the plain-ESM file src/control/webhooks/sign-worker.mjs, resolved from this module's URL so
 * that it loads both from src/ (tsx, vitest) and from the compiled dist/ (`skylark serve`).
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Piscina } from 'piscina';
import { signPayload } from './signature.js';

/** Signs `<t>.<body>` with a webhook secret; resolves to lowercase hex HMAC-SHA256. */
export interface Signer {
  sign(secret: string, t: number, body: string): Promise<string>;
  close(): Promise<void>;
}

/**
 * The worker file: `src/control/webhooks/sign-worker.mjs`, whether this module runs as
 * src/control/webhooks/signer.ts or dist/control/webhooks/signer.js (the .mjs is not compiled, so
 * dist/ points back at src/).
 * @throws Error when the file cannot be found
 */
export function signWorkerFile(): string {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const candidates = [path.join(here, 'sign-worker.mjs'), path.resolve(here, '..', '..', '..', 'src', 'control', 'webhooks', 'sign-worker.mjs')];
  const found = candidates.find((f) => existsSync(f));
  if (!found) throw new Error(`webhook sign worker not found (looked in ${candidates.join(', ')})`);
  return found;
}

interface Pending {
  secret: string;
  t: number;
  body: string;
  resolve: (hex: string) => void;
  reject: (e: unknown) => void;
}

/** Options of the worker pool. Threads default to 1–2 (signing is microseconds; the box is shared). */
export interface PiscinaSignerOptions {
  minThreads?: number;
  maxThreads?: number;
  /** Largest number of signatures in one task (default 256). */
  maxBatch?: number;
}

/** A Signer backed by a Piscina pool running src/control/webhooks/sign-worker.mjs. */
export class PiscinaSigner implements Signer {
  private readonly pool: Piscina;
  private readonly maxBatch: number;
  private queue: Pending[] = [];
  private scheduled = false;

  constructor(opts: PiscinaSignerOptions = {}) {
    this.pool = new Piscina({
      filename: signWorkerFile(),
      minThreads: opts.minThreads ?? 1,
      maxThreads: opts.maxThreads ?? 2,
      idleTimeout: 30_000,
    });
    this.maxBatch = opts.maxBatch ?? 256;
  }

  sign(secret: string, t: number, body: string): Promise<string> {
    return new Promise((resolve, reject) => {
      this.queue.push({ secret, t, body, resolve, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  private flush(): void {
    this.scheduled = false;
    const all = this.queue;
    this.queue = [];
    for (let i = 0; i < all.length; i += this.maxBatch) {
      const batch = all.slice(i, i + this.maxBatch);
      this.pool.run({ items: batch.map((p) => ({ secret: p.secret, t: p.t, body: p.body })) }).then(
        (out: string[]) => batch.forEach((p, j) => p.resolve(out[j]!)),
        (e: unknown) => batch.forEach((p) => p.reject(e)),
      );
    }
  }

  async close(): Promise<void> {
    await this.pool.destroy();
  }
}

/** A Signer on the main thread (the bench's baseline; not used by the server). */
export class MainThreadSigner implements Signer {
  async sign(secret: string, t: number, body: string): Promise<string> {
    return signPayload(secret, t, body);
  }
  async close(): Promise<void> {}
}
