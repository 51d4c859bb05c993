/**
 * The `skylark` command line (docs/behaviour.md §1, §9, §12): `serve`, `accounts create|set-login`,
 * `keys list|create|roll|revoke`, `oauth-clients create`, `edge-config`, `systemd-unit`, `import-icecast`.
 * Arguments are parsed by node:util parseArgs; every command takes `--data-dir` (or SKYLARK_DATA_DIR)
 * and `--config FILE` (or SKYLARK_CONFIG; docs/configuration.md "Configuration file") and works
 * while `serve` runs on the same data dir. `main` resolves to the exit code; bin/skylark.js
 * exits with it.
 */
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { spawnSync } from 'node:child_process';
import { loadConfig, ALL_ENV_NAMES, ConfigError } from '../base/config.js';
import { flagsWithConfigFile, readConfigFile } from '../base/config-file.js';
import { PortInUseError } from '../base/http/port-probe.js';
import { EdgeConfigError, makeEdgeDirs, nginxEdgeConfig } from './edge-config.js';
import { SystemdUnitError, systemdUnit } from './systemd-unit.js';
import { loadNodeSecret } from '../base/auth/secrets.js';
import { edgeLogSecretOf } from '../delivery/listeners/edge-log.js';
import { settings } from './settings.js';
import { serve } from './serve.js';
import { accountsCreate, accountsSetLogin, keys, oauthClientsCreate } from './accounts.js';

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
