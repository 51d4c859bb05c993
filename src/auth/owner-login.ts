/**
 * Owner login (PRODUCT.md §7): an account's owner email and scrypt password hash, checked for the
 * OAuth consent page now and the dashboard later. Unknown emails cost the same scrypt work as known
 * ones, so response time does not tell which emails exist.
 */
import type { AccountRow, AccountsRepo } from '../db/accounts-repo.js';
import { hashPassword, verifyPassword } from './secrets.js';

let dummyHash: Promise<string> | null = null;

/** The account whose owner logs in with `email` / `password`, or null. Emails compare case-insensitively. */
export async function verifyOwnerLogin(accounts: AccountsRepo, email: string, password: string): Promise<AccountRow | null> {
  const row = email ? accounts.getByEmail(email.trim().toLowerCase()) : undefined;
  if (!row || !row.password_hash) {
    dummyHash ??= hashPassword('not a password of anyone');
    await verifyPassword(password, await dummyHash);
    return null;
  }
  return (await verifyPassword(password, row.password_hash)) ? row : null;
}
