/**
 * One server per port (docs/behaviour.md §1 "One server per port"). The HTTP library binds its
 * listen socket with SO_REUSEPORT, so the worker threads of one node can share the port; a second
 * process on the same port would join that group too and answer half the requests from another
 * database. Before the main thread binds, a probe socket without SO_REUSEPORT is bound to the same
 * address: the kernel refuses it (EADDRINUSE) while any other socket listens there, whatever its
 * options. The probe is closed at once and the HTTP library binds; the window between the two is a
 * few system calls.
 */
import net from 'node:net';

/** A port another process holds: the message names the protocol, host and port. */
export class PortInUseError extends Error {
  readonly code = 'port_in_use';
  constructor(
    readonly protocol: string,
    readonly host: string,
    readonly port: number,
  ) {
    super(`${protocol} port ${port} on ${host} is in use by another process (is another skylark serve running?)`);
    this.name = 'PortInUseError';
  }
}

/**
 * Resolves when `host:port` (TCP, port > 0) can be bound by this process now.
 * @param protocol the name used in the error, e.g. "HTTP".
 * @throws PortInUseError when another socket listens there (EADDRINUSE)
 * @throws Error (the system's) for any other bind failure (no permission, unknown host)
 */
export async function assertPortFree(protocol: string, host: string, port: number): Promise<void> {
  if (port === 0) return;
  const probe = net.createServer();
  try {
    await new Promise<void>((resolve, reject) => {
      probe.once('error', reject);
      // exclusive: in a cluster worker, bind here rather than share the primary's handle.
      probe.listen({ host, port, exclusive: true, backlog: 1 }, () => resolve());
    });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EADDRINUSE') throw new PortInUseError(protocol, host, port);
    throw e;
  } finally {
    await new Promise<void>((resolve) => (probe.listening ? probe.close(() => resolve()) : resolve()));
  }
}

/** Whether `e` says a port was in use (EADDRINUSE from the kernel, or a PortInUseError). */
export function isAddressInUse(e: unknown): boolean {
  if (e instanceof PortInUseError) return true;
  const text = e instanceof Error ? `${(e as NodeJS.ErrnoException).code ?? ''} ${e.message}` : String(e);
  return /EADDRINUSE|address already in use/i.test(text);
}
