/**
 * The account commands of `skylark` (docs/behaviour.md §1, §9 "Keys CLI"): `accounts create|set-login`,
 * `keys list|create|roll|revoke` and `oauth-clients create`, on the data dir's database (while
 * `serve` runs on it too).
 */
import { parseArgs } from 'node:util';
import { ConfigError } from '../base/config.js';
import { openDatabase } from '../base/db/database.js';
import { AccountsRepo } from '../base/db/accounts-repo.js';
import { OAuthRepo } from '../base/db/oauth-repo.js';
import { AccountsService, REGIONS, type Region } from '../control/services/accounts.js';
import { OAuthClients } from '../control/oauth/clients.js';
import { PasswordInputError, readPassword } from './password.js';
import { dataDirOf } from './settings.js';

/**
 * `accounts create --name N --plan free|paid [--region R] [--email E --password P]`: creates an
 * account and prints its id and keys (shown once; `--json`: the whole answer). Exit 2 (ConfigError)
 * for a bad option.
 */
export async function accountsCreate(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      name: { type: 'string' },
      plan: { type: 'string', default: 'free' },
      region: { type: 'string', default: 'eu-west-1' },
      email: { type: 'string' },
      password: { type: 'string' },
      json: { type: 'boolean', default: false },
      'data-dir': { type: 'string' },
      config: { type: 'string' },
    },
    strict: true,
  });
  if (!values.name) throw new ConfigError('accounts create needs --name');
  if (values.plan !== 'free' && values.plan !== 'paid') throw new ConfigError('--plan must be free or paid');
  if (!(values.region! in REGIONS)) throw new ConfigError(`--region must be one of ${Object.keys(REGIONS).join(', ')}`);
  if ((values.email === undefined) !== (values.password === undefined)) throw new ConfigError('--email and --password go together');
  const db = openDatabase(dataDirOf(values));
  try {
    const service = new AccountsService(new AccountsRepo(db));
    const created = await service.create({ name: values.name, plan: values.plan, region: values.region as Region, email: values.email, password: values.password });
    if (values.json) process.stdout.write(JSON.stringify(created) + '\n');
    else process.stdout.write(`account ${created.account.id}\nsecretKey: ${created.secretKey}\npublishableKey: ${created.publishableKey}\n`);
    return 0;
  } finally {
    db.close();
  }
}

/**
 * `accounts set-login --account ACCT --email E`: gives the account (the first-start default one
 * included) its owner login for the dashboard and the OAuth consent page. The password comes from
 * stdin (src/cli/password.ts), never from argv. Exit 1 with a message for an unknown account, an
 * email another account has, or no usable password.
 */
export async function accountsSetLogin(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      account: { type: 'string' },
      email: { type: 'string' },
      json: { type: 'boolean', default: false },
      'data-dir': { type: 'string' },
      config: { type: 'string' },
    },
    strict: true,
  });
  if (!values.account) throw new ConfigError('accounts set-login needs --account');
  if (!values.email) throw new ConfigError('accounts set-login needs --email (the password is read from stdin, never from the command line)');
  const db = openDatabase(dataDirOf(values));
  try {
    const repo = new AccountsRepo(db);
    const service = new AccountsService(repo);
    const fail = (message: string, code = 1) => {
      process.stderr.write(`skylark: ${message}\n`);
      return code;
    };
    // Refused before the password is asked for; setLogin checks again (another process may race).
    if (!repo.get(values.account)) return fail(`no such account: ${values.account}`);
    const email = values.email.trim().toLowerCase();
    const owner = repo.getByEmail(email);
    if (owner && owner.id !== values.account) return fail(`an account with the email ${email} already exists`);
    let password: string;
    try {
      password = await readPassword();
    } catch (e) {
      if (e instanceof PasswordInputError) return fail(e.message, e.exitCode);
      throw e;
    }
    let account;
    try {
      account = await service.setLogin(values.account, values.email, password);
    } catch (e) {
      return fail((e as Error).message);
    }
    if (values.json) process.stdout.write(JSON.stringify({ account }) + '\n');
    else process.stdout.write(`login set: ${account.email} signs in to ${account.id} (dashboard, OAuth consent)\n`);
    return 0;
  } finally {
    db.close();
  }
}

/**
 * `keys list|create|roll|revoke` (`sub`): an account's API keys; a created or rolled key is printed
 * once. Exit 1 with a message for an unknown account or key, 2 (ConfigError) for a bad option.
 */
export function keys(sub: string, args: string[]): number {
  const { values } = parseArgs({
    args,
    options: {
      account: { type: 'string' },
      type: { type: 'string', default: 'secret' },
      key: { type: 'string' },
      json: { type: 'boolean', default: false },
      'data-dir': { type: 'string' },
      config: { type: 'string' },
    },
    strict: true,
  });
  const db = openDatabase(dataDirOf(values));
  try {
    const service = new AccountsService(new AccountsRepo(db));
    const print = (v: unknown, text: string) => process.stdout.write(values.json ? JSON.stringify(v) + '\n' : text + '\n');
    try {
      if (sub === 'list') {
        if (!values.account) throw new ConfigError('keys list needs --account');
        const list = service.listKeys(values.account);
        print({ object: 'list', data: list }, list.map((k) => `${k.id} ${k.type} ${k.prefix}…${k.last4}${k.revokedAt ? ' revoked' : ''}`).join('\n'));
      } else if (sub === 'create') {
        if (!values.account) throw new ConfigError('keys create needs --account');
        if (values.type !== 'secret' && values.type !== 'publishable') throw new ConfigError('--type must be secret or publishable');
        const k = service.createKey(values.account, values.type);
        print(k, k.key);
      } else if (sub === 'roll') {
        if (!values.key) throw new ConfigError('keys roll needs --key');
        const k = service.rollKey(values.key);
        print(k, k.key);
      } else {
        if (!values.key) throw new ConfigError('keys revoke needs --key');
        service.revokeKey(values.key, values.account);
        print({ revoked: true }, 'revoked');
      }
      return 0;
    } catch (e) {
      if (e instanceof ConfigError) throw e;
      process.stderr.write(`skylark: ${(e as Error).message}\n`);
      return 1;
    }
  } finally {
    db.close();
  }
}

/**
 * `oauth-clients create`: registers an OAuth client. Prints `{ clientId, clientSecret, client }`
 * (`clientSecret` null for `--public`; shown once, stored hashed). Exit 1 on a bad redirect URI.
 */
export function oauthClientsCreate(args: string[]): number {
  const { values } = parseArgs({
    args,
    options: {
      name: { type: 'string' },
      'redirect-uri': { type: 'string', multiple: true },
      public: { type: 'boolean', default: false },
      account: { type: 'string' },
      json: { type: 'boolean', default: false },
      'data-dir': { type: 'string' },
      config: { type: 'string' },
    },
    strict: true,
  });
  if (!values.name) throw new ConfigError('oauth-clients create needs --name');
  if (!values['redirect-uri']?.length) throw new ConfigError('oauth-clients create needs --redirect-uri');
  const db = openDatabase(dataDirOf(values));
  try {
    if (values.account && !new AccountsRepo(db).get(values.account)) {
      process.stderr.write(`skylark: no such account: ${values.account}\n`);
      return 1;
    }
    let created;
    try {
      created = new OAuthClients(new OAuthRepo(db)).create({
        name: values.name,
        redirectUris: values['redirect-uri'],
        public: values.public,
        accountId: values.account ?? null,
      });
    } catch (e) {
      process.stderr.write(`skylark: ${(e as Error).message}\n`);
      return 1;
    }
    const out = { clientId: created.clientId, clientSecret: created.clientSecret, client: created.client };
    if (values.json) process.stdout.write(JSON.stringify(out) + '\n');
    else process.stdout.write(`clientId: ${out.clientId}\n${out.clientSecret ? `clientSecret: ${out.clientSecret}\n` : '(public client: no secret; use PKCE)\n'}`);
    return 0;
  } finally {
    db.close();
  }
}
