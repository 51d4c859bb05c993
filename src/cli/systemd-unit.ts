/**
 * `skylark systemd-unit` (docs/deploy.md "The service"): a systemd service unit (systemd.service(5),
 * systemd.exec(5)) that runs `skylark serve` as an unprivileged user with the data dir as the only
 * writable path, restarts it on failure and raises its open-file limit to what the listener caps
 * allow. `systemd-analyze verify` accepts it (test/integration/cli/systemd-unit.test.ts).
 *
 * Hardening kept off because it would break the node: `MemoryDenyWriteExecute=` (V8 compiles
 * JavaScript into executable memory), `PrivateNetwork=`/`IPAddressDeny=` (it serves the network),
 * `PrivateUsers=` (it would hide the data dir's owner). `PrivateTmp=yes` gives it a private,
 * writable /tmp: the HTTP threads' unix socket lives there (src/delivery/threads/index.ts).
 */
import path from 'node:path';
import type { LimitSettings } from '../base/config.js';

/** What the unit is made from; every path absolute. */
export interface SystemdUnitOptions {
  /** The system user (and group of the same name) the service runs as. */
  user: string;
  /** The data dir: the only writable path, and the working directory. */
  dataDir: string;
  /** The configuration file `serve` reads (`--config`); none: defaults, flags in ExecStart only. */
  configFile?: string | undefined;
  /** The node binary (`process.execPath`). */
  node: string;
  /** The CLI script, bin/skylark.js of the installed checkout. */
  cli: string;
  /** The listener caps the configuration sets (`LimitNOFILE=`). */
  limits: LimitSettings;
  /** Every TCP and UDP port `serve` binds with this configuration (0 = a free port). */
  ports: number[];
}

/** Thrown for an option that cannot go into a unit file; the message names it. */
export class SystemdUnitError extends Error {}

/** Paths written into the unit unquoted: no whitespace, quotes, backslash, `%` or `$`. */
const SAFE_PATH = /^\/[\w@+=:,./-]*$/;

/**
 * The open-file limit (`LimitNOFILE=`) for `limits`: one descriptor per connection each cap admits
 * (held HTTP requests, progressive listeners, RTMP and Icecast publishers, pending WHEP offers),
 * doubled for what no cap counts (keep-alive HTTP connections between a player's requests,
 * connected WebRTC peers, database and media files, FFmpeg pipes), rounded up to a power of two,
 * at least 65536. The defaults give 2 × 71,400 → 262,144.
 */
export function openFileLimit(limits: LimitSettings): number {
  const connections = limits.httpMaxHeld + limits.listenMaxConnections + limits.rtmpMaxConnections + limits.icecastMaxConnections + limits.whepMaxPending;
  let n = 65536;
  while (n < 2 * connections) n *= 2;
  return n;
}

/**
 * The unit file's text for `o`.
 * @throws SystemdUnitError naming a path or user name a unit file cannot carry as given
 */
export function systemdUnit(o: SystemdUnitOptions): string {
  if (!/^[a-z_][a-z0-9_-]{0,31}$/.test(o.user)) throw new SystemdUnitError(`--user must be a system user name such as skylark (got '${o.user}')`);
  const paths: Array<[string, string | undefined]> = [['--data-dir', o.dataDir], ['--config', o.configFile], ['node', o.node], ['bin/skylark.js', o.cli]];
  for (const [what, p] of paths) {
    if (p !== undefined && !SAFE_PATH.test(p)) throw new SystemdUnitError(`${what} must be an absolute path of letters, digits and @+=:,./_- (got '${p}')`);
  }
  // Under /home, /root or /run/user, ProtectHome=yes would hide the node, the checkout or the data.
  const inHome = paths.some(([, p]) => p !== undefined && /^\/(home|root|run\/user)(\/|$)/.test(p));
  const privileged = o.ports.some((p) => p > 0 && p < 1024);
  const exec = [o.node, o.cli, 'serve', ...(o.configFile ? ['--config', o.configFile] : []), '--data-dir', o.dataDir].join(' ');
  return `# Skylark (docs/deploy.md in the Skylark repository), made by: skylark systemd-unit --user ${o.user} --data-dir ${o.dataDir}${o.configFile ? ` --config ${o.configFile}` : ''}
# Install: this text in /etc/systemd/system/skylark.service, then
#   systemctl daemon-reload && systemctl enable --now skylark
[Unit]
Description=Skylark live audio streaming and podcast server
Documentation=file://${path.resolve(path.dirname(o.cli), '..', 'docs', 'deploy.md')}
After=network-online.target
Wants=network-online.target

[Service]
Type=exec
User=${o.user}
Group=${o.user}
ExecStart=${exec}
WorkingDirectory=${o.dataDir}
# SIGTERM to skylark alone: its graceful stop ends its FFmpeg processes itself; whatever is left
# when the stop is over (or after TimeoutStopSec) gets SIGKILL.
KillMode=mixed
TimeoutStopSec=${Math.ceil(o.limits.shutdownTimeoutMs / 1000) + 5}s
Restart=on-failure
RestartSec=2s
# Exit 2 is a configuration error: restarting would only repeat it.
RestartPreventExitStatus=2
# One descriptor per connection the caps admit, doubled, to a power of two (skylark systemd-unit
# derives it from the configuration's caps: regenerate the unit after raising them).
LimitNOFILE=${openFileLimit(o.limits)}
UMask=0027

# The data dir is the only writable path (and a private /tmp: the HTTP threads' socket).
ProtectSystem=strict
ReadWritePaths=${o.dataDir}
PrivateTmp=yes
ProtectHome=${inHome ? 'read-only' : 'yes'}
NoNewPrivileges=yes
${
  privileged
    ? `# A port below 1024 in the configuration: binding it takes CAP_NET_BIND_SERVICE, and nothing else.
CapabilityBoundingSet=CAP_NET_BIND_SERVICE
AmbientCapabilities=CAP_NET_BIND_SERVICE`
    : `# Every port at 1024 or above: no capability at all (regenerate the unit to bind one below 1024).
CapabilityBoundingSet=`
}
PrivateDevices=yes
ProtectClock=yes
ProtectHostname=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectKernelLogs=yes
ProtectControlGroups=yes
ProtectProc=invisible
RestrictSUIDSGID=yes
RestrictRealtime=yes
RestrictNamespaces=yes
LockPersonality=yes
RemoveIPC=yes
# IPv4 and IPv6 for every listener; unix sockets for the HTTP threads; netlink for the interface
# addresses WebRTC offers as host candidates.
RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX AF_NETLINK
SystemCallArchitectures=native
SystemCallFilter=@system-service
SystemCallErrorNumber=EPERM

[Install]
WantedBy=multi-user.target
`;
}
