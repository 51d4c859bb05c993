/** Accounts and their API keys (CLI `accounts create`, `keys …`, first-start default account). */
import { newId } from '../../base/ids.js';
import type { AccountRow, AccountsRepo } from '../../base/db/accounts-repo.js';
import { apiKeyRecord, generateApiKey, type KeyType } from '../../base/auth/api-keys.js';
import { hashPassword, hashToken } from '../../base/auth/secrets.js';

export const REGIONS = { 'eu-west-1': 'euw1', 'ap-southeast-1': 'apse1' } as const;
export type Region = keyof typeof REGIONS;

/** The account object as the API and CLI show it. */
export interface AccountObject {
  id: string;
  object: 'account';
  name: string;
  plan: 'free' | 'paid';
  defaultRegion: string;
  email: string | null;
  createdAt: string;
}

/** An API key as listed (never the secret). */
export interface ApiKeyObject {
  id: string;
  object: 'api_key';
  type: KeyType;
  prefix: string;
  last4: string;
  createdAt: string;
  revokedAt: string | null;
}

export interface CreateAccountInput {
  name: string;
  plan: 'free' | 'paid';
  region: Region;
  email?: string | undefined;
  password?: string | undefined;
}

export class AccountsService {
  constructor(private readonly repo: AccountsRepo, private readonly now: () => number = Date.now) {}

  /**
   * Creates an account with one secret and one publishable key; the keys are returned once.
   * @throws Error when another account already uses the owner email.
   */
  async create(input: CreateAccountInput): Promise<{ account: AccountObject; secretKey: string; publishableKey: string }> {
    const email = input.email?.toLowerCase();
    if (email !== undefined && this.repo.getByEmail(email)) throw new Error(`an account with the email ${email} already exists`);
    const passwordHash = input.password ? await hashPassword(input.password) : null;
    const row: AccountRow = {
      id: newId('acct'),
      name: input.name,
      plan: input.plan,
      default_region: input.region,
      owner_email: email ?? null,
      password_hash: passwordHash,
      created_at: this.now(),
    };
    const secretKey = generateApiKey('secret');
    const publishableKey = generateApiKey('publishable');
    this.repo.db.transaction(() => {
      this.repo.insert(row);
      this.repo.insertApiKey(apiKeyRecord(newId('key'), row.id, 'secret', secretKey, row.created_at));
      this.repo.insertApiKey(apiKeyRecord(newId('key'), row.id, 'publishable', publishableKey, row.created_at));
    })();
    return { account: toAccountObject(row), secretKey, publishableKey };
  }

  /**
   * Gives the account its owner login (dashboard and OAuth consent page; docs/behaviour.md §1
   * `accounts set-login`), replacing an earlier one. As `create`: the email is stored lower-case
   * and must not be another account's; the password is stored as a scrypt hash. Sessions opened
   * with the earlier login end.
   * @throws Error 'no such account: …' | 'an account with the email … already exists' |
   *   'the email is empty' | 'the password is empty'
   */
  async setLogin(accountId: string, email: string, password: string): Promise<AccountObject> {
    const normalized = email.trim().toLowerCase();
    if (!normalized) throw new Error('the email is empty');
    if (!password) throw new Error('the password is empty');
    if (!this.repo.get(accountId)) throw new Error(`no such account: ${accountId}`);
    const taken = () => new Error(`an account with the email ${normalized} already exists`);
    const owner = this.repo.getByEmail(normalized);
    if (owner && owner.id !== accountId) throw taken();
    const passwordHash = await hashPassword(password);
    try {
      if (!this.repo.setLogin(accountId, normalized, passwordHash)) throw new Error(`no such account: ${accountId}`);
    } catch (e) {
      // Another process took the email while the password was being hashed.
      if ((e as { code?: string }).code === 'SQLITE_CONSTRAINT_UNIQUE') throw taken();
      throw e;
    }
    return toAccountObject(this.repo.get(accountId)!);
  }

  /** Whether no account exists yet (first start). */
  isEmpty(): boolean {
    return this.repo.count() === 0;
  }

  get(id: string): AccountObject | undefined {
    const row = this.repo.get(id);
    return row && toAccountObject(row);
  }

  listKeys(accountId: string): ApiKeyObject[] {
    return this.repo.apiKeysOf(accountId).map((k) => ({
      id: k.id,
      object: 'api_key',
      type: k.type,
      prefix: k.prefix,
      last4: k.last4,
      createdAt: new Date(k.created_at).toISOString(),
      revokedAt: k.revoked_at === null ? null : new Date(k.revoked_at).toISOString(),
    }));
  }

  /** Adds a key of `type` to the account; returns the key string once. @throws Error if no such account */
  createKey(accountId: string, type: KeyType): { id: string; key: string } {
    if (!this.repo.get(accountId)) throw new Error(`no such account: ${accountId}`);
    const key = generateApiKey(type);
    const id = newId('key');
    this.repo.insertApiKey(apiKeyRecord(id, accountId, type, key, this.now()));
    return { id, key };
  }

  /**
   * Replaces `key` (a key string, or a `key_…` id as the dashboard and `keys list` show it) by a new
   * key of the same type, in one transaction; the old one stops working at once. With `accountId`,
   * the key must belong to that account. @throws Error 'no such active key'
   */
  rollKey(keyOrId: string, accountId?: string): { id: string; key: string } {
    const row = keyOrId.startsWith('key_') ? this.repo.apiKeyById(keyOrId) : this.repo.apiKeyByHash(hashToken(keyOrId));
    if (!row || row.revoked_at !== null || (accountId !== undefined && row.account_id !== accountId)) throw new Error('no such active key');
    return this.repo.db.transaction(() => {
      this.repo.revokeApiKey(row.id, this.now());
      return this.createKey(row.account_id, row.type);
    })();
  }

  /**
   * Revokes `key` (a key string or a `key_…` id as `keys list` shows it); with `accountId`, the key
   * must belong to that account. @throws Error 'no such active key'
   */
  revokeKey(keyOrId: string, accountId?: string): void {
    const row = keyOrId.startsWith('key_') ? this.repo.apiKeyById(keyOrId) : this.repo.apiKeyByHash(hashToken(keyOrId));
    if (!row || (accountId !== undefined && row.account_id !== accountId) || !this.repo.revokeApiKey(row.id, this.now())) {
      throw new Error('no such active key');
    }
  }
}

/** The account object (API and CLI) of a row. */
export function toAccountObject(row: AccountRow): AccountObject {
  return {
    id: row.id,
    object: 'account',
    name: row.name,
    plan: row.plan,
    defaultRegion: row.default_region,
    email: row.owner_email,
    createdAt: new Date(row.created_at).toISOString(),
  };
}
