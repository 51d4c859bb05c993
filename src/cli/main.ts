/**
 * The `skylark` command line (PRODUCT.md §1, §9): `serve`, `accounts create`, `keys list|create|roll|revoke`,
 * `oauth-clients create`.
 * Arguments are parsed by node:util parseArgs; every command takes `--data-dir` (or SKYLARK_DATA_DIR)
 * and works while `serve` runs on the same data dir.
 */
import { parseArgs } from 'node:util';
import { loadConfig, ALL_ENV_NAMES, ConfigError } from '../config/config.js';
import { openDatabase } from '../db/database.js';
import { AccountsRepo } from '../db/accounts-repo.js';
import { AccountsService, REGIONS, type Region } from '../services/accounts.js';
import { createLogger } from '../log/logger.js';
import { startServer } from '../main.js';
import { OAuthRepo } from '../db/oauth-repo.js';
import { OAuthClients } from '../oauth/clients.js';

const USAGE = `usage: skylark <command> [options]

commands:
  serve                              run the server (HTTP API + HLS, RTMP ingest)
  accounts create --name N --plan free|paid [--region eu-west-1|ap-southeast-1]
                  [--email E --password P] [--json]
  keys list --account ACCT [--json]
  keys create --account ACCT --type secret|publishable [--json]
  keys roll --key KEY [--json]
  keys revoke --key KEY
  oauth-clients create --name N --redirect-uri U [--redirect-uri U2 …] [--public]
                       [--account ACCT] [--json]   (prints clientId, clientSecret)

options for every command: --data-dir DIR (SKYLARK_DATA_DIR, default ./data)
serve options (each also an environment variable): ${Object.entries(ALL_ENV_NAMES)
  .map(([k, e]) => `--${k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)} (${e})`)
  .join(', ')}
`;

const CONFIG_FLAGS = Object.fromEntries(
  Object.keys(ALL_ENV_NAMES).map((k) => [k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`), { type: 'string' as const }]),
);

/** Runs the CLI with `argv` (without node and script); resolves to the exit code. */
export async function main(argv: string[]): Promise<number> {
  const [command, sub] = argv;
  try {
    if (!command || command === 'help' || command === '--help' || command === '-h') {
      process.stdout.write(USAGE);
      return command ? 0 : 2;
    }
    if (command === 'serve') return await serve(argv.slice(1));
    if (command === 'accounts' && sub === 'create') return await accountsCreate(argv.slice(2));
    if (command === 'keys' && sub && ['list', 'create', 'roll', 'revoke'].includes(sub)) return keys(sub, argv.slice(2));
    if (command === 'oauth-clients' && sub === 'create') return oauthClientsCreate(argv.slice(2));
    process.stderr.write(`skylark: unknown command '${argv.slice(0, 2).join(' ')}'\n${USAGE}`);
    return 2;
  } catch (e) {
    if (e instanceof ConfigError || (e instanceof TypeError && (e as NodeJS.ErrnoException).code?.startsWith('ERR_PARSE_ARGS'))) {
      process.stderr.write(`skylark: ${e.message}\n`);
      return 2;
    }
    throw e;
  }
}

async function serve(args: string[]): Promise<number> {
  const { values } = parseArgs({ args, options: { ...CONFIG_FLAGS }, strict: true });
  const config = loadConfig(process.env, values as Record<string, string | undefined>);
  const log = createLogger(config.logLevel);
  const server = await startServer(config, log);
  if (server.accounts.isEmpty()) {
    const created = await server.accounts.create({ name: 'Default account', plan: 'paid', region: 'eu-west-1' });
    process.stderr.write(
      `Created the default account ${created.account.id}. Its keys are shown once:\nsecretKey: ${created.secretKey}\npublishableKey: ${created.publishableKey}\n`,
    );
  }
  const host = (h: string) => (h.includes(':') ? `[${h}]` : h);
  process.stdout.write(
    JSON.stringify({ event: 'listening', http: `http://${host(config.httpHost)}:${server.httpPort}`, rtmp: `rtmp://${host(config.rtmpHost)}:${server.rtmpPort}` }) + '\n',
  );
  await new Promise<void>((resolve) => {
    const stop = () => resolve();
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
  await server.close();
  return 0;
}

function dataDirOf(values: { 'data-dir'?: string | undefined }): string {
  return loadConfig(process.env, { 'data-dir': values['data-dir'] }).dataDir;
}

async function accountsCreate(args: string[]): Promise<number> {
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

function keys(sub: string, args: string[]): number {
  const { values } = parseArgs({
    args,
    options: {
      account: { type: 'string' },
      type: { type: 'string', default: 'secret' },
      key: { type: 'string' },
      json: { type: 'boolean', default: false },
      'data-dir': { type: 'string' },
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
function oauthClientsCreate(args: string[]): number {
  const { values } = parseArgs({
    args,
    options: {
      name: { type: 'string' },
      'redirect-uri': { type: 'string', multiple: true },
      public: { type: 'boolean', default: false },
      account: { type: 'string' },
      json: { type: 'boolean', default: false },
      'data-dir': { type: 'string' },
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
