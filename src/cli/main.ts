/**
 * The `skylark` command line (docs/behaviour.md §1, §9, §12): `serve`, `accounts create|set-login`,
 * `keys list|create|roll|revoke`, `oauth-clients create`, `edge-config`, `systemd-unit`, `import-icecast`.
 * Arguments are parsed by node:util parseArgs; every command takes `--data-dir` (or SKYLARK_DATA_DIR)
 * and `--config FILE` (or SKYLARK_CONFIG; docs/configuration.md "Configuration file") and works
 * while `serve` runs on the same data dir. `main` resolves to the exit code; bin/skylark.js
 * exits with it.
 */
import { parseArgs } from 'node:util';
import path from 'node:path';
import { constants as osConstants } from 'node:os';
import { fileURLToPath } from 'node:url';
import { spawnSync } from 'node:child_process';
import { loadConfig, ALL_ENV_NAMES, ConfigError, type Config } from '../base/config.js';
import { flagsWithConfigFile, readConfigFile } from '../base/config-file.js';
import { openDatabase } from '../base/db/database.js';
import { AccountsRepo } from '../base/db/accounts-repo.js';
import { AccountsService, REGIONS, type Region } from '../control/services/accounts.js';
import { createLogger, type Logger } from '../base/logger.js';
import { PortInUseError } from '../base/http/port-probe.js';
import { ServerProcess, startServer, type RunningServer } from '../main.js';
import { OAuthRepo } from '../base/db/oauth-repo.js';
import { OAuthClients } from '../control/oauth/clients.js';
import { PasswordInputError, readPassword } from './password.js';
import { EdgeConfigError, makeEdgeDirs, nginxEdgeConfig } from './edge-config.js';
import { SystemdUnitError, systemdUnit } from './systemd-unit.js';
import { loadNodeSecret } from '../base/auth/secrets.js';
import { edgeLogSecretOf } from '../delivery/listeners/edge-log.js';

const USAGE = `usage: skylark <command> [options]

commands:
  serve [--config FILE]              run the server (HTTP API + HLS, RTMP ingest); FILE (or
                                     SKYLARK_CONFIG) is a TOML file of the serve options below
                                     (http-port = 8080); flags, then environment, win over it
  accounts create --name N --plan free|paid [--region eu-west-1|ap-southeast-1]
                  [--email E --password P] [--json]
  accounts set-login --account ACCT --email E [--json]
                  gives the account its dashboard login; the password is read from
                  stdin (typed twice on a terminal, else the first line of stdin)
  keys list --account ACCT [--json]
  keys create --account ACCT --type secret|publishable [--json]
  keys roll --key KEY [--json]
  keys revoke --key KEY
  oauth-clients create --name N --redirect-uri U [--redirect-uri U2 …] [--public]
                       [--account ACCT] [--json]   (prints clientId, clientSecret)
  edge-config --origin URL --listen HOST:PORT --cache-dir DIR [--log-to HOST:PORT]
              [--trust-forwarded-from CIDR …] [--user USER] [--cache-max-size 2g]
              [--access-log FILE] [--no-mkdir]
              [--tls-cert PEM --tls-key PEM [--nginx-version 1.22.1]]
                  prints an nginx.conf for a caching edge in front of this origin
                  (run it with: nginx -c FILE) and creates the folders it names
                  under --cache-dir (not with --no-mkdir); --log-to is the origin's
                  edge log receiver (SKYLARK_EDGE_LOG_HOST:SKYLARK_EDGE_LOG_PORT):
                  its lines carry the origin's edge-log secret, so run it with the
                  origin's --data-dir (or its SKYLARK_EDGE_LOG_SECRET); with --tls-cert
                  and --tls-key it listens with TLS and HTTP/2 (the form of the nginx
                  found here, nginx -v, or of --nginx-version)
  systemd-unit [--user skylark] [--data-dir /var/lib/skylark] [--config FILE]
                  prints a hardened systemd service unit that runs serve as USER
                  with the data dir as its only writable path (docs/deploy.md)
  import-icecast FILE [--account ACCT] [--keep-passwords] [--json]
                  creates one stream per <mount> of an Icecast config, with that
                  mount name, and prints each stream's key (docs/icecast.md)

options for every command: --data-dir DIR (SKYLARK_DATA_DIR, default ./data),
  --config FILE (SKYLARK_CONFIG)
serve stops gracefully on SIGTERM or SIGINT (within --shutdown-timeout-ms, then exit 0);
a second signal exits at once.
serve options (each also an environment variable): ${Object.entries(ALL_ENV_NAMES)
  .map(([k, e]) => `--${k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)} (${e})`)
  .join(', ')}
`;

const CONFIG_FLAGS = Object.fromEntries(
  Object.keys(ALL_ENV_NAMES).map((k) => [k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`), { type: 'string' as const }]),
);

/**
 * The configuration from the flags in `values`, the environment and the configuration file
 * (`values.config`, else SKYLARK_CONFIG), in that order of precedence.
 * @throws ConfigError naming the flag, variable, or file, line and key at fault
 */
function settings(values: Record<string, unknown>): Config {
  const flags: Record<string, string | undefined> = {};
  for (const [k, v] of Object.entries(values)) if (k !== 'config' && typeof v === 'string') flags[k] = v;
  const file = (values.config as string | undefined) || process.env.SKYLARK_CONFIG;
  return loadConfig(process.env, file ? flagsWithConfigFile(readConfigFile(file), process.env, flags) : flags);
}

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
    if (command === 'accounts' && sub === 'set-login') return await accountsSetLogin(argv.slice(2));
    if (command === 'keys' && sub && ['list', 'create', 'roll', 'revoke'].includes(sub)) return keys(sub, argv.slice(2));
    if (command === 'oauth-clients' && sub === 'create') return oauthClientsCreate(argv.slice(2));
    if (command === 'edge-config') return edgeConfig(argv.slice(1));
    if (command === 'systemd-unit') return systemdUnitCommand(argv.slice(1));
    if (command === 'import-icecast') return (await import('./import-icecast.js')).importIcecast(argv.slice(1));
    process.stderr.write(`skylark: unknown command '${argv.slice(0, 2).join(' ')}'\n${USAGE}`);
    return 2;
  } catch (e) {
    if (e instanceof ConfigError || (e instanceof TypeError && (e as NodeJS.ErrnoException).code?.startsWith('ERR_PARSE_ARGS'))) {
      process.stderr.write(`skylark: ${e.message}\n`);
      return 2;
    }
    if (e instanceof PortInUseError) {
      process.stderr.write(`skylark: ${e.message}\n`);
      return 1;
    }
    throw e;
  }
}

/**
 * `serve`: runs the server until SIGTERM or SIGINT, then stops it gracefully — every listener and
 * connection closed, `RunningServer.close()` allowed to finish — within
 * `config.limits.shutdownTimeoutMs`. Resolves to 0 once stopped, 1 when the stop failed or took
 * longer than that; a second signal during the stop exits at once with 128 + its number.
 */
async function serve(args: string[]): Promise<number> {
  const { values } = parseArgs({ args, options: { ...CONFIG_FLAGS, config: { type: 'string' } }, strict: true });
  const config = settings(values);
  const log = createLogger(config.logLevel);
  // Listening for the signal before starting: a supervisor may send it as soon as it reads the
  // listening line, or even during the start (the server then stops once it has started).
  const proc = new ServerProcess();
  const stop = stopSignal(log, proc);
  const server = await startServer(config, log, Date.now, proc);
  if (server.accounts.isEmpty()) {
    const created = await server.accounts.create({ name: 'Default account', plan: 'paid', region: 'eu-west-1' });
    const dataDir = config.dataDir === path.resolve('data') ? '' : ` --data-dir ${shellQuote(config.dataDir)}`;
    process.stderr.write(
      `Created the default account ${created.account.id}. Its keys are shown once:\nsecretKey: ${created.secretKey}\npublishableKey: ${created.publishableKey}\n` +
        `Give it a dashboard login (the password is read from stdin):\n  npx skylark accounts set-login --account ${created.account.id} --email you@example.com${dataDir}\n`,
    );
  }
  const host = (h: string) => (h.includes(':') ? `[${h}]` : h);
  process.stdout.write(
    JSON.stringify({
      event: 'listening',
      http: `http://${host(config.httpHost)}:${server.httpPort}`,
      rtmp: `rtmp://${host(config.rtmpHost)}:${server.rtmpPort}`,
      icecast: `http://${host(config.icecastHost)}:${server.icecastPort}`,
      // The edge log receiver (docs/behaviour.md §12) as `host:port`, what `edge-config --log-to` takes.
      ...(server.edgeLogPort !== null ? { edgeLog: `${host(config.edgeLogHost!)}:${server.edgeLogPort}` } : {}),
    }) + '\n',
  );
  return stopGracefully(server, proc, log, await stop, config.limits.shutdownTimeoutMs);
}

/**
 * Handles SIGTERM and SIGINT for the life of the process (a handler removed and added again
 * would leave a moment in which the signal's default action kills the process). Resolves with
 * the first signal; any later one exits the process at once with 128 + its number (143, 130), as
 * a shell reports a death by that signal.
 */
function stopSignal(log: Logger, proc: ServerProcess): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    let seen = false;
    const on = (signal: NodeJS.Signals) => {
      if (!seen) {
        seen = true;
        return resolve(signal);
      }
      log.warn('second signal: exiting without finishing the stop', { signal });
      void exitNow(128 + osConstants.signals[signal], proc, log);
    };
    process.on('SIGTERM', on);
    process.on('SIGINT', on);
  });
}

/**
 * Closes `server` within `timeoutMs` (ms); `signal` is the one that asked for it (logged).
 * Resolves to the exit code: 0 stopped, 1 the stop failed or was cut short at the deadline.
 */
async function stopGracefully(server: RunningServer, proc: ServerProcess, log: Logger, signal: NodeJS.Signals, timeoutMs: number): Promise<number> {
  const started = Date.now();
  log.info('stopping', { signal, timeoutMs });
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), timeoutMs)));
  const outcome = await Promise.race([
    server.close().then(
      () => 'stopped' as const,
      (e: unknown) => {
        log.error('the stop failed', { err: e instanceof Error ? e.message : String(e) });
        return 'failed' as const;
      },
    ),
    deadline,
  ]);
  clearTimeout(timer);
  if (outcome === 'timeout') {
    log.error('the graceful stop took longer than its deadline: exiting anyway', { timeoutMs, setting: 'SKYLARK_SHUTDOWN_TIMEOUT_MS' });
    await exitNow(1, proc, log);
  }
  // What still holds the event loop besides stdio (codec processes told to end may still be
  // exiting); anything else is a leak to fix.
  log.debug('left on the event loop after the stop', { resources: process.getActiveResourcesInfo() });
  log.info('stopped', { ms: Date.now() - started });
  return outcome === 'stopped' ? 0 : 1;
}

/**
 * Exits with `code` at once — after the HTTP worker threads closed their sockets (up to 1 s):
 * Node aborts a process that ends while a worker's uWS App is open. A worker that does not end
 * by then is not waited for: the process kills itself (SIGKILL), the one exit that does not abort.
 */
async function exitNow(code: number, proc: ServerProcess, log: Logger): Promise<never> {
  if (!(await proc.workers.stopAll(1000))) {
    log.error('an HTTP thread did not stop in time: killing the process', { code });
    process.kill(process.pid, 'SIGKILL');
  }
  process.exit(code);
}

/** `s` as one POSIX shell word. */
function shellQuote(s: string): string {
  return /^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

function dataDirOf(values: { 'data-dir'?: string | undefined; config?: string | undefined }): string {
  return settings({ 'data-dir': values['data-dir'], config: values.config }).dataDir;
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
async function accountsSetLogin(args: string[]): Promise<number> {
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

function keys(sub: string, args: string[]): number {
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

/**
 * `edge-config`: prints the nginx.conf of a caching edge in front of this origin (docs/behaviour.md §12,
 * src/cli/edge-config.ts). Exit 2 with a message naming a missing or malformed option.
 */
function edgeConfig(args: string[]): number {
  const { values } = parseArgs({
    args,
    options: {
      origin: { type: 'string' },
      listen: { type: 'string' },
      'cache-dir': { type: 'string' },
      'log-to': { type: 'string' },
      'trust-forwarded-from': { type: 'string', multiple: true },
      user: { type: 'string' },
      'cache-max-size': { type: 'string' },
      'access-log': { type: 'string' },
      'data-dir': { type: 'string' },
      config: { type: 'string' },
      'no-mkdir': { type: 'boolean' },
      'tls-cert': { type: 'string' },
      'tls-key': { type: 'string' },
      'nginx-version': { type: 'string' },
    },
    strict: true,
  });
  for (const need of ['origin', 'listen', 'cache-dir'] as const) if (!values[need]) throw new ConfigError(`edge-config needs --${need}`);
  // The origin's edge-log secret: its SKYLARK_EDGE_LOG_SECRET, else the one derived from its data dir.
  let logSecret: string | undefined;
  if (values['log-to']) {
    const config = settings({ 'data-dir': values['data-dir'], config: values.config });
    logSecret = config.edgeLogSecret ?? edgeLogSecretOf(loadNodeSecret(config.dataDir));
  }
  try {
    const options = {
      origin: values.origin!,
      listen: values.listen!,
      cacheDir: values['cache-dir']!,
      logTo: values['log-to'],
      logSecret,
      trustForwardedFrom: values['trust-forwarded-from'],
      user: values.user,
      cacheMaxSize: values['cache-max-size'],
      accessLog: values['access-log'],
      tlsCert: values['tls-cert'],
      tlsKey: values['tls-key'],
      nginxVersion: values['nginx-version'] ?? (values['tls-cert'] ? installedNginxVersion() : undefined),
    };
    const text = nginxEdgeConfig(options);
    if (!values['no-mkdir']) makeEdgeDirs(options);
    process.stdout.write(text);
    return 0;
  } catch (e) {
    if (e instanceof EdgeConfigError) throw new ConfigError(e.message);
    throw e;
  }
}

/** The version of the nginx on this machine (`nginx -v`: `nginx version: nginx/1.22.1`), or undefined. */
function installedNginxVersion(): string | undefined {
  for (const bin of ['nginx', '/usr/sbin/nginx', '/usr/local/sbin/nginx']) {
    const r = spawnSync(bin, ['-v'], { encoding: 'utf8', timeout: 5000 });
    const m = /nginx\/(\d+\.\d+\.\d+)/.exec(`${r.stderr ?? ''}${r.stdout ?? ''}`);
    if (m) return m[1];
  }
  return undefined;
}

/**
 * `systemd-unit`: prints the systemd service unit of this checkout (src/cli/systemd-unit.ts): the
 * data dir from `--data-dir`, else the configuration file's `data-dir`, else /var/lib/skylark; the
 * open-file limit and capabilities from the configuration's caps and ports. Exit 2 with a message
 * for a bad option or configuration file.
 */
function systemdUnitCommand(args: string[]): number {
  const { values } = parseArgs({
    args,
    options: { user: { type: 'string', default: 'skylark' }, 'data-dir': { type: 'string' }, config: { type: 'string' } },
    strict: true,
  });
  // The service's own environment is not this shell's: only the file and the flags count.
  const configPath = values.config || process.env.SKYLARK_CONFIG;
  const file = configPath ? readConfigFile(configPath) : undefined;
  const flags = { 'data-dir': values['data-dir'] ?? file?.values['data-dir'] ?? '/var/lib/skylark' };
  const config = loadConfig({}, file ? flagsWithConfigFile(file, {}, flags) : flags);
  const ports = [config.httpPort, config.rtmpPort, config.icecastPort, config.edgeLogPort ?? 0];
  try {
    const cli = fileURLToPath(new URL('../../bin/skylark.js', import.meta.url));
    process.stdout.write(systemdUnit({ user: values.user!, dataDir: config.dataDir, configFile: file?.path, node: process.execPath, cli, limits: config.limits, ports }));
    return 0;
  } catch (e) {
    if (e instanceof SystemdUnitError) throw new ConfigError(e.message);
    throw e;
  }
}
