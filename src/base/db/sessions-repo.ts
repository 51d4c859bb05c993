/** Owner login sessions (migration 004). The session id is stored as its SHA-256 only; times in ms. */
import type { Database } from './database.js';

export interface SessionRow {
  id_hash: Buffer;
  account_id: string | null;
  csrf_token: string;
  created_at: number;
  expires_at: number;
  last_seen_at: number;
}

export class SessionsRepo {
  private readonly s;
  constructor(readonly db: Database) {
    this.s = {
      insert: db.prepare(
        'INSERT INTO sessions (id_hash, account_id, csrf_token, created_at, expires_at, last_seen_at) VALUES (@id_hash, @account_id, @csrf_token, @created_at, @expires_at, @last_seen_at)',
      ),
      get: db.prepare('SELECT * FROM sessions WHERE id_hash = ?'),
      del: db.prepare('DELETE FROM sessions WHERE id_hash = ?'),
      touch: db.prepare('UPDATE sessions SET last_seen_at = ? WHERE id_hash = ?'),
      purge: db.prepare('DELETE FROM sessions WHERE expires_at < ?'),
    };
  }
  insert(r: SessionRow): void {
    this.s.insert.run(r);
  }
  get(idHash: Buffer): SessionRow | undefined {
    return this.s.get.get(idHash) as SessionRow | undefined;
  }
  delete(idHash: Buffer): void {
    this.s.del.run(idHash);
  }
  touch(idHash: Buffer, at: number): void {
    this.s.touch.run(at, idHash);
  }
  /** Deletes sessions that expired before `before` (ms). */
  purge(before: number): void {
    this.s.purge.run(before);
  }
}
