/** Accounts and their API keys (hashes only). */
import type { Database } from './database.js';

export interface AccountRow {
  id: string;
  name: string;
  plan: 'free' | 'paid';
  default_region: string;
  owner_email: string | null;
  password_hash: string | null;
  created_at: number;
}

export interface ApiKeyRow {
  id: string;
  account_id: string;
  type: 'secret' | 'publishable';
  key_hash: Buffer;
  prefix: string;
  last4: string;
  created_at: number;
  revoked_at: number | null;
}

/** Prepared statements over `accounts` and `api_keys`. */
export class AccountsRepo {
  private readonly insertAccount;
  private readonly byId;
  private readonly countAll;
  private readonly insertKey;
  private readonly keyByHash;
  private readonly keyById;
  private readonly byEmail;
  private readonly keysOf;
  private readonly revoke;
  private readonly setHash;
  private readonly updateLogin;
  private readonly endSessions;

  constructor(readonly db: Database) {
    this.insertAccount = db.prepare(
      'INSERT INTO accounts (id, name, plan, default_region, owner_email, password_hash, created_at) VALUES (@id, @name, @plan, @default_region, @owner_email, @password_hash, @created_at)',
    );
    this.byId = db.prepare('SELECT * FROM accounts WHERE id = ?');
    this.countAll = db.prepare('SELECT COUNT(*) FROM accounts').pluck();
    this.insertKey = db.prepare(
      'INSERT INTO api_keys (id, account_id, type, key_hash, prefix, last4, created_at) VALUES (@id, @account_id, @type, @key_hash, @prefix, @last4, @created_at)',
    );
    this.keyByHash = db.prepare('SELECT * FROM api_keys WHERE key_hash = ?');
    this.keyById = db.prepare('SELECT * FROM api_keys WHERE id = ?');
    this.byEmail = db.prepare('SELECT * FROM accounts WHERE owner_email = ?');
    this.keysOf = db.prepare('SELECT * FROM api_keys WHERE account_id = ? ORDER BY seq DESC');
    this.revoke = db.prepare('UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL');
    this.setHash = db.prepare('UPDATE accounts SET password_hash = ? WHERE id = ? AND password_hash = ?');
    this.updateLogin = db.prepare('UPDATE accounts SET owner_email = ?, password_hash = ? WHERE id = ?');
    this.endSessions = db.prepare('DELETE FROM sessions WHERE account_id = ?');
  }

  insert(a: AccountRow): void {
    this.insertAccount.run(a);
  }
  get(id: string): AccountRow | undefined {
    return this.byId.get(id) as AccountRow | undefined;
  }
  /** The account whose owner login is `email` (stored lower-case), or undefined. */
  getByEmail(email: string): AccountRow | undefined {
    return this.byEmail.get(email) as AccountRow | undefined;
  }
  count(): number {
    return this.countAll.get() as number;
  }
  /** The id of the node's only account, or undefined when it has none or several. */
  soleAccountId(): string | undefined {
    const ids = this.db.prepare('SELECT id FROM accounts LIMIT 2').pluck().all() as string[];
    return ids.length === 1 ? ids[0] : undefined;
  }
  insertApiKey(k: Omit<ApiKeyRow, 'revoked_at'>): void {
    this.insertKey.run(k);
  }
  apiKeyByHash(hash: Buffer): ApiKeyRow | undefined {
    return this.keyByHash.get(hash) as ApiKeyRow | undefined;
  }
  /** The key with id `key_…`, or undefined. */
  apiKeyById(id: string): ApiKeyRow | undefined {
    return this.keyById.get(id) as ApiKeyRow | undefined;
  }
  apiKeysOf(accountId: string): ApiKeyRow[] {
    return this.keysOf.all(accountId) as ApiKeyRow[];
  }
  /** Replaces the owner's password hash `from` with `to` (a rehash); false when it changed meanwhile. */
  replacePasswordHash(id: string, from: string, to: string): boolean {
    return this.setHash.run(to, id, from).changes === 1;
  }

  /**
   * Sets the owner login (`email` stored as given: lower-case it first) and ends the account's owner
   * sessions, in one transaction; false when the account does not exist.
   * @throws SqliteError SQLITE_CONSTRAINT_UNIQUE when another account has `email`
   */
  setLogin(id: string, email: string, passwordHash: string): boolean {
    return this.db.transaction(() => {
      if (this.updateLogin.run(email, passwordHash, id).changes !== 1) return false;
      this.endSessions.run(id);
      return true;
    })();
  }
  /** Marks a key revoked at `at` (ms); false when it was already revoked or does not exist. */
  revokeApiKey(id: string, at: number): boolean {
    return this.revoke.run(at, id).changes === 1;
  }
}
