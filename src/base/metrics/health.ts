/**
 * Liveness and readiness (docs/behaviour.md "Operating the node"): `GET /healthz` answers 200 while
 * the process serves; `GET /readyz` runs every check and answers 200 when each passes, else 503,
 * with a JSON body naming each check and, for a failed one, why. Informational checks (`gating:
 * false`) are listed but never fail readiness.
 */

/** One readiness check. `run` returns null when it passes, else the reason; a throw counts as a failure with its message. */
export interface HealthCheck {
  name: string;
  run(): string | null;
  /** Whether a failure makes the node unready (default true). */
  gating?: boolean;
}

/** The outcome of one check as `/readyz` lists it. */
export interface CheckOutcome {
  name: string;
  ok: boolean;
  /** Informational checks do not fail readiness. */
  gating: boolean;
  /** Why it failed (absent when it passed). */
  reason?: string;
}

/** The `/readyz` answer: status 200 or 503 and its JSON body. */
export interface Readiness {
  status: 200 | 503;
  body: { ready: boolean; checks: CheckOutcome[]; failed: string[] };
}

/** Runs every check once, in order. */
export function readiness(checks: readonly HealthCheck[]): Readiness {
  const outcomes: CheckOutcome[] = [];
  for (const c of checks) {
    let reason: string | null;
    try {
      reason = c.run();
    } catch (e) {
      reason = e instanceof Error ? e.message : String(e);
    }
    const gating = c.gating !== false;
    outcomes.push(reason === null ? { name: c.name, ok: true, gating } : { name: c.name, ok: false, gating, reason });
  }
  const failed = outcomes.filter((o) => !o.ok && o.gating).map((o) => o.name);
  return { status: failed.length ? 503 : 200, body: { ready: failed.length === 0, checks: outcomes, failed } };
}
