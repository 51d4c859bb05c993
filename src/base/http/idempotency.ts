/**
 * `Idempotency-Key` on POST (docs/behaviour.md §7; Stripe's semantics), kept in SQLite for 24 h:
 * - first request with a key: runs, and its answer (2xx, or a 4xx other than 400/409/429) is stored,
 *   encrypted under the node secret (responses may hold stream keys or signing secrets); a 400 (the
 *   parameters failed validation) stores nothing, as Stripe saves no result for a request that
 *   never started executing, so a corrected retry with the same key runs;
 * - a replay (same actor, key, method, path and body) answers the stored response with
 *   `Idempotent-Replayed: true`, without running the handler again;
 * - the same key with another body, method or path → 400 `idempotency_key_reused`;
 * - the same key while the first request is still running → 409 `idempotency_key_in_use`;
 * - a 5xx or an unexpected failure stores nothing (the key is released; a retry runs again).
 * Keys are scoped by actor: the credential the guard authenticated (the API key, or the OAuth grant
 * for every access token of one grant), not only the account, so a replay never shows one principal
 * another's answer (docs/behaviour.md §13). Bodies compare after parsing,
 * with object keys sorted (whitespace and key order do not matter).
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { ApiReply, ApiRequest, IdempotencyHook } from './server.js';
import { IdempotencyRepo } from '../db/idempotency-repo.js';
import type { Database } from '../db/database.js';
import { ApiError } from '../errors/errors.js';
import { randomBase62 } from '../ids.js';
import { decryptSecret, encryptSecret } from '../auth/secrets.js';

/** How long a key is remembered (ms). */
export const IDEMPOTENCY_TTL_MS = 24 * 3600 * 1000;
/** Longest accepted key (characters), as Stripe. */
export const IDEMPOTENCY_KEY_MAX = 255;
const PURGE_EVERY_MS = 60_000;

export class IdempotencyStore implements IdempotencyHook {
  private readonly repo: IdempotencyRepo;
  /** This process's id: an in-flight row owned by another (a previous run) is abandoned. */
  private readonly owner = randomBase62(16);
  private lastPurge = 0;

  constructor(db: Database, private readonly nodeSecret: Buffer, private readonly now: () => number = Date.now) {
    this.repo = new IdempotencyRepo(db);
  }

  /** @see IdempotencyHook.begin @throws ApiError 400 idempotency_key_invalid | idempotency_key_reused, 409 idempotency_key_in_use */
  begin(req: ApiRequest): ReturnType<IdempotencyHook['begin']> {
    const key = req.headers.idempotencyKey;
    if (key.length > IDEMPOTENCY_KEY_MAX) {
      throw new ApiError('idempotency_key_invalid', `The Idempotency-Key header must be at most ${IDEMPOTENCY_KEY_MAX} characters.`);
    }
    const now = this.now();
    this.purge(now);
    const actor = req.actor ?? `auth:${createHash('sha256').update(req.headers.authorization).digest('base64url')}`;
    const path = req.url;
    const bodyHash = createHash('sha256').update(canonicalJson(req.body)).digest();
    const row = { actor, key, method: req.method, path, body_hash: bodyHash, owner: this.owner, created_at: now };
    if (!this.repo.tryInsert(row)) {
      const old = this.repo.get(actor, key)!;
      const expired = old.created_at < now - IDEMPOTENCY_TTL_MS;
      const abandoned = old.status === null && old.owner !== this.owner;
      if (expired || abandoned) {
        this.repo.delete(actor, key);
        if (!this.repo.tryInsert(row)) throw inUse();
      } else {
        if (old.method !== req.method || old.path !== path || !timingSafeEqual(old.body_hash, bodyHash)) {
          throw new ApiError(
            'idempotency_key_reused',
            `This Idempotency-Key was already used with a different request (${old.method} ${old.path} with other parameters). Use a new key for a new request.`,
          );
        }
        if (old.status === null || !old.response_enc) throw inUse();
        const stored = JSON.parse(decryptSecret(this.nodeSecret, old.response_enc)) as { status: number; headers?: Record<string, string>; body: unknown };
        return { kind: 'replay', reply: { status: stored.status, body: stored.body, headers: stored.headers } };
      }
    }
    return {
      kind: 'proceed',
      complete: (reply: ApiReply | null) => {
        try {
          if (!reply || !keeps(reply.status)) return this.repo.delete(actor, key);
          const enc = encryptSecret(this.nodeSecret, JSON.stringify({ status: reply.status, headers: reply.headers, body: reply.body }));
          this.repo.complete(actor, key, this.owner, reply.status, enc);
        } catch {
          this.repo.delete(actor, key);
        }
      },
    };
  }

  private purge(now: number): void {
    if (now - this.lastPurge < PURGE_EVERY_MS) return;
    this.lastPurge = now;
    this.repo.purge(now - IDEMPOTENCY_TTL_MS);
  }
}

/** Whether an answer with `status` is stored: not 5xx (a retry may succeed), not 400 (validation), 409 or 429 (transient). */
const keeps = (status: number) => status < 500 && status !== 400 && status !== 409 && status !== 429;

const inUse = () =>
  new ApiError('idempotency_key_in_use', 'A request with this Idempotency-Key is still being processed; retry after it finished.');

/** JSON with object keys sorted at every level (the body as parsed, so formatting does not matter). */
export function canonicalJson(v: unknown): string {
  if (v === null || typeof v !== 'object') return JSON.stringify(v) ?? 'null';
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  const o = v as Record<string, unknown>;
  return `{${Object.keys(o)
    .sort()
    .map((k) => `${JSON.stringify(k)}:${canonicalJson(o[k])}`)
    .join(',')}}`;
}
