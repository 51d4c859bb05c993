/**
 * Idempotency keys (migration 004): one row per (actor, key), where the actor is the credential
 * that sent the request (`<account>/<key id or OAuth grant id>`). `status` NULL marks a request in
 * flight; `owner` is the id of the server process that runs it (a row owned by a process that is
 * gone is abandoned). Times in ms.
 */
import type { Database } from './database.js';

export interface IdempotencyRow {
  actor: string;
  key: string;
  method: string;
  path: string;
  body_hash: Buffer;
  owner: string;
  status: number | null;
  response_enc: Buffer | null;
  created_at: number;
}

export class IdempotencyRepo {
  private readonly s;
  constructor(readonly db: Database) {
    this.s = {
      get: db.prepare('SELECT * FROM idempotency_keys WHERE actor = ? AND key = ?'),
      insert: db.prepare(
        'INSERT OR IGNORE INTO idempotency_keys (actor, key, method, path, body_hash, owner, created_at) VALUES (@actor, @key, @method, @path, @body_hash, @owner, @created_at)',
      ),
      del: db.prepare('DELETE FROM idempotency_keys WHERE actor = ? AND key = ?'),
      complete: db.prepare('UPDATE idempotency_keys SET status = ?, response_enc = ? WHERE actor = ? AND key = ? AND owner = ?'),
      purge: db.prepare('DELETE FROM idempotency_keys WHERE created_at < ?'),
    };
  }
  get(actor: string, key: string): IdempotencyRow | undefined {
    return this.s.get.get(actor, key) as IdempotencyRow | undefined;
  }
  /** Inserts an in-flight row; false when (actor, key) already exists. */
  tryInsert(r: Omit<IdempotencyRow, 'status' | 'response_enc'>): boolean {
    return this.s.insert.run(r).changes === 1;
  }
  delete(actor: string, key: string): void {
    this.s.del.run(actor, key);
  }
  complete(actor: string, key: string, owner: string, status: number, responseEnc: Buffer): void {
    this.s.complete.run(status, responseEnc, actor, key, owner);
  }
  /** Deletes rows created before `before` (ms). */
  purge(before: number): number {
    return this.s.purge.run(before).changes;
  }
}
