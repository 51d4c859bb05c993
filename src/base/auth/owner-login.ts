/**
 * Owner login (docs/behaviour.md §7): an account's owner email and scrypt password hash, checked by the
 * OAuth login form and the dashboard's. Unknown emails cost the same scrypt work as known ones, so
 * response time does not tell which emails exist. Failed logins back off per account
 * (src/base/auth/login-throttle.ts); a hash made at an older scrypt cost is replaced at the next
 * successful login.
 */
import type { AccountRow, AccountsRepo } from '../db/accounts-repo.js';
import type { LoginThrottle } from './login-throttle.js';
import { hashPassword, needsRehash, PasswordHashBusyError, verifyPassword } from './secrets.js';

let dummyHash: Promise<string> | null = null;

/**
 * The account whose owner logs in with `email` / `password`, or null. Emails compare
 * case-insensitively. After a match, a hash of an older cost is rehashed at the current one
 * (best effort: a failure leaves the old hash, which still verifies).
 * @throws PasswordHashBusyError when the node is computing as many password hashes as it takes
 */
export async function verifyOwnerLogin(accounts: AccountsRepo, email: string, password: string): Promise<AccountRow | null> {
  const row = email ? accounts.getByEmail(email.trim().toLowerCase()) : undefined;
  if (!row || !row.password_hash) {
    dummyHash ??= hashPassword('not a password of anyone').catch((e: unknown) => {
      dummyHash = null;
      throw e;
    });
    await verifyPassword(password, await dummyHash);
    return null;
  }
  if (!(await verifyPassword(password, row.password_hash))) return null;
  if (needsRehash(row.password_hash)) {
    try {
      const upgraded = await hashPassword(password);
      if (accounts.replacePasswordHash(row.id, row.password_hash, upgraded)) return { ...row, password_hash: upgraded };
    } catch {
      /* busy or failed: the old hash stays and is upgraded at a later login */
    }
  }
  return row;
}

/** What one sign-in attempt came to. Seconds round up. */
export type OwnerLoginResult =
  | { kind: 'ok'; account: AccountRow }
  | { kind: 'wrong' }
  /** The account (as named by the email) is backing off after failed logins. */
  | { kind: 'locked'; retryAfterS: number }
  /** The node is computing as many password hashes as it takes. */
  | { kind: 'busy'; retryAfterS: number };

/**
 * One owner sign-in attempt from client address `ip` (already counted against the per-IP limit):
 * refused while the account backs off, else the password is checked and the outcome recorded.
 */
export async function signInOwner(accounts: AccountsRepo, throttle: LoginThrottle, email: string, password: string, ip: string): Promise<OwnerLoginResult> {
  const check = throttle.begin(email, ip);
  if (!check.allowed) return { kind: 'locked', retryAfterS: Math.max(1, Math.ceil(check.retryAfterMs / 1000)) };
  let account: AccountRow | null;
  try {
    account = await verifyOwnerLogin(accounts, email, password);
  } catch (e) {
    if (e instanceof PasswordHashBusyError) return { kind: 'busy', retryAfterS: 1 };
    throw e;
  }
  if (!account) return { kind: 'wrong' };
  throttle.succeeded(email, ip);
  return { kind: 'ok', account };
}
