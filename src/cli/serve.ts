/**
 * `skylark serve` (docs/behaviour.md §1): starts the server, makes the default account on a
 * first start, prints the listening line, and stops gracefully on SIGTERM or SIGINT.
 */
import { parseArgs } from 'node:util';
import path from 'node:path';
import { constants as osConstants } from 'node:os';
import { createLogger, type Logger } from '../base/logger.js';
import { ServerProcess, startServer, type RunningServer } from '../main.js';
import { CONFIG_FLAGS, settings } from './settings.js';

/**
 * `serve`: runs the server until SIGTERM or SIGINT, then stops it gracefully — every listener and
 * connection closed, `RunningServer.close()` allowed to finish — within
 * `config.limits.shutdownTimeoutMs`. Resolves to 0 once stopped, 1 when the stop failed or took
 * longer than that; a second signal during the stop exits at once with 128 + its number.
 */
export async function serve(args: string[]): Promise<number> {
  const { values } = parseArgs({ args, options: { ...CONFIG_FLAGS, config: { type: 'string' } }, strict: true });
  const config = settings(values);
  const log = createLogger(config.logLevel);
  // Listening for the signal before starting: a supervisor may send it as soon as it reads the
  // listening line, or even during the start (the server then stops once it has started).
  const proc = new ServerProcess();
  const signals = stopSignal(log, proc);
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
  const code = await stopGracefully(server, proc, log, await signals.first, config.limits.shutdownTimeoutMs, () => signals.forced() !== null);
  // A second signal during the stop decides the exit code, even when the stop ends first.
  return signals.forced() ?? code;
}

/**
 * Handles SIGTERM and SIGINT for the life of the process (a handler removed and added again
 * would leave a moment in which the signal's default action kills the process). `first` resolves
 * with the first signal; any later one exits the process at once with 128 + its number (143, 130),
 * as a shell reports a death by that signal, and from then on `forced()` is that code (the stop
 * may end while the exit waits for the HTTP threads: the process still ends with it).
 */
function stopSignal(log: Logger, proc: ServerProcess): { first: Promise<NodeJS.Signals>; forced(): number | null } {
  let forced: number | null = null;
  const first = new Promise<NodeJS.Signals>((resolve) => {
    let seen = false;
    const on = (signal: NodeJS.Signals) => {
      if (!seen) {
        seen = true;
        return resolve(signal);
      }
      log.warn('second signal: exiting without finishing the stop', { signal });
      forced ??= 128 + osConstants.signals[signal];
      void exitNow(forced, proc, log);
    };
    process.on('SIGTERM', on);
    process.on('SIGINT', on);
  });
  return { first, forced: () => forced };
}

/**
 * Closes `server` within `timeoutMs` (ms); `signal` is the one that asked for it (logged).
 * Resolves to the exit code: 0 stopped, 1 the stop failed or was cut short at the deadline or a
 * second signal came (`interrupted()`: its own exit is under way, and "stopped" is not logged).
 */
async function stopGracefully(server: RunningServer, proc: ServerProcess, log: Logger, signal: NodeJS.Signals, timeoutMs: number, interrupted: () => boolean): Promise<number> {
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
  // The stop may end inside the event loop's poll phase that also saw a second signal, and libuv
  // dispatches signals after that phase's other callbacks: one full turn of the loop (a second
  // poll, with a zero timeout while an immediate is queued) lets a signal already caught reach
  // its handler before the stop is reported done.
  await new Promise((r) => setImmediate(r));
  await new Promise((r) => setImmediate(r));
  if (interrupted()) return 1;
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
