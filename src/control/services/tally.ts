/**
 * What the play log (tracks) and the broadcast log share: a listener tally per country read back
 * from its stored JSON, and a save that runs at most once per interval after a change
 * (docs/streams.md "Broadcasts": figures are written at most once a second and at the end).
 */

/** Listeners per country as stored (`[{country, listeners}]`, country null = unknown). */
export interface TrackCountry {
  country: string | null;
  listeners: number;
}

/**
 * Listeners per country from a stored JSON value (`TrackCountry[]`); the unknown country is the
 * key ''. A damaged value gives an empty tally (it starts over) instead of throwing.
 */
export function countriesFromJson(json: string): Map<string, number> {
  const countries = new Map<string, number>();
  try {
    for (const c of JSON.parse(json) as TrackCountry[]) countries.set(c.country ?? '', c.listeners);
  } catch {
    // A damaged value starts over.
  }
  return countries;
}

/** Runs `save` once, `everyMs` after the first `schedule()` since the last run (an unref'd timer). */
export class DebouncedSave {
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly everyMs: number,
    private readonly save: () => void,
  ) {}

  /** Asks for a save within `everyMs`; does nothing while one is pending. */
  schedule(): void {
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.save();
    }, this.everyMs);
    this.timer.unref();
  }

  /** Saves now and drops the pending timer (shutdown). */
  flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.save();
  }
}
