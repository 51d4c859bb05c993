/**
 * The current day's download clients (docs/podcasts.md "Download counting"), with the two rules
 * that keep made-up clients from inflating or blocking the counts:
 * - **One address, many User-Agents.** An address group with more than
 *   `MAX_USER_AGENTS_PER_ADDRESS` distinct User-Agents on one episode in a day is counted as one
 *   client: its User-Agents' states are merged into one state of the address (their bytes summed),
 *   and of the downloads they had counted, all but one are taken back.
 * - **A fair share of the daily cap per podcast.** At the cap, a new client of a podcast holding
 *   less than its share (the cap ÷ the podcasts with clients that day) takes the place of the
 *   oldest not-yet-counted client of the podcast holding the most; counted clients are never
 *   dropped (that would count them twice).
 * Pure bookkeeping in memory: no I/O, no clock.
 */

/** Distinct User-Agents one address group may show on one episode in a day before it is one client. */
export const MAX_USER_AGENTS_PER_ADDRESS = 10;

/** One client's progress on one episode, the current day. */
export interface ClientState {
  /** The client's hash (address group + User-Agent); for a merged address, the address hash. */
  client: string;
  /** The address group's hash ('' for progress stored before addresses were kept). */
  address: string;
  episodeId: string;
  podcastId: string;
  bytes: number;
  /** Counted, or merged into its address's state (it counts no more on its own). */
  counted: boolean;
  /** The download it counted (JSON of its count key), while that download stands; null otherwise. */
  countedAs: string | null;
  /** The address's merged state, once this User-Agent's progress was merged into it. */
  into: ClientState | null;
}

interface AddressState {
  members: Set<ClientState>;
  shared: ClientState | null;
}

interface PodcastShare {
  n: number;
  /** Its clients not yet counted, oldest first (the ones a fairer podcast may replace). */
  evictable: Set<ClientState>;
}

/** What `DayClients` reports back to the counter. */
export interface DayClientsHooks {
  /** The cap refused a new client (the counter logs it once a day). */
  full(): void;
  /** A counted download is taken back (`countedAs`: the JSON of its count key). */
  retract(countedAs: string): void;
}

/** The day's clients; see the file's comment. */
export class DayClients {
  private readonly byKey = new Map<string, ClientState>();
  private readonly addresses = new Map<string, AddressState>();
  private readonly podcasts = new Map<string, PodcastShare>();
  /** States changed since the last `takeChanges` (to be written). */
  private dirty = new Set<ClientState>();
  /** States dropped to make room since the last `takeChanges` (to be deleted). */
  private evicted: ClientState[] = [];

  /** @param cap clients (client × episode) held at most, shared fairly per podcast */
  constructor(private readonly cap: number, private readonly hooks: DayClientsHooks) {}

  get size(): number {
    return this.byKey.size;
  }

  /** Adds states read back from the database (a restart the same day), merged addresses included. */
  load(states: ClientState[]): void {
    for (const s of states) {
      if (!s.address || s.client !== s.address) {
        this.register(s);
        continue;
      }
      this.byKey.set(`${s.client} ${s.episodeId}`, s);
      this.share(s.podcastId).n++;
      this.addressOf(s).shared = s;
    }
    for (const a of this.addresses.values()) if (a.shared) for (const m of a.members) m.into = a.shared;
  }

  /**
   * The state bytes of (`address`, `client`) for `episodeId` go to: the address's merged state,
   * the client's own, or a new one; null when the cap leaves no room for a new one.
   */
  find(address: string, client: string, episodeId: string, podcastId: string): ClientState | null {
    const a = this.addresses.get(`${address} ${episodeId}`);
    if (a?.shared) return a.shared;
    const known = this.byKey.get(`${client} ${episodeId}`);
    if (known) return known;
    if (!this.admit(podcastId)) return null;
    const s: ClientState = { client, address, episodeId, podcastId, bytes: 0, counted: false, countedAs: null, into: null };
    this.register(s);
    const own = this.addresses.get(`${address} ${episodeId}`)!;
    return own.members.size > MAX_USER_AGENTS_PER_ADDRESS ? this.merge(own, s) : s;
  }

  /** `s` counted the download `countedAs` (JSON of its count key). */
  counted(s: ClientState, countedAs: string): void {
    s.counted = true;
    s.countedAs = countedAs;
    this.podcasts.get(s.podcastId)?.evictable.delete(s);
    this.dirty.add(s);
  }

  /** `s` has new bytes to write. */
  changed(s: ClientState): void {
    this.dirty.add(s);
  }

  /** The states to write and to delete since the last call. */
  takeChanges(): { changed: ClientState[]; evicted: ClientState[] } {
    const out = { changed: [...this.dirty], evicted: this.evicted };
    this.dirty = new Set();
    this.evicted = [];
    return out;
  }

  /** Puts changes a failed write did not store back, to be written next time. */
  restoreChanges(c: { changed: ClientState[]; evicted: ClientState[] }): void {
    for (const s of c.changed) this.dirty.add(s);
    this.evicted.push(...c.evicted);
  }

  private register(s: ClientState): void {
    this.byKey.set(`${s.client} ${s.episodeId}`, s);
    const p = this.share(s.podcastId);
    p.n++;
    if (!s.counted) p.evictable.add(s);
    if (s.address) this.addressOf(s).members.add(s);
  }

  private share(podcastId: string): PodcastShare {
    let p = this.podcasts.get(podcastId);
    if (!p) this.podcasts.set(podcastId, (p = { n: 0, evictable: new Set() }));
    return p;
  }

  private addressOf(s: ClientState): AddressState {
    const ak = `${s.address} ${s.episodeId}`;
    let a = this.addresses.get(ak);
    if (!a) this.addresses.set(ak, (a = { members: new Set(), shared: null }));
    return a;
  }

  /** Merges an address's User-Agents into one client (see the file's comment); returns the merged state. */
  private merge(a: AddressState, last: ClientState): ClientState {
    const members = [...a.members];
    const standing = members.filter((m) => m.countedAs !== null);
    const shared: ClientState = {
      client: last.address,
      address: last.address,
      episodeId: last.episodeId,
      podcastId: last.podcastId,
      bytes: members.reduce((n, m) => n + m.bytes, 0),
      counted: standing.length > 0,
      countedAs: null,
      into: null,
    };
    for (const m of standing.slice(1)) {
      this.hooks.retract(m.countedAs!);
      m.countedAs = null;
    }
    for (const m of members) {
      m.counted = true;
      m.into = shared;
      this.podcasts.get(m.podcastId)?.evictable.delete(m);
      this.dirty.add(m);
    }
    // Held beyond the cap by at most one per merged address (each took 11 places first); never evicted.
    this.byKey.set(`${shared.client} ${shared.episodeId}`, shared);
    this.share(shared.podcastId).n++;
    a.shared = shared;
    this.dirty.add(shared);
    return shared;
  }

  /** Whether a new client of `podcastId` may be held, making room for it when its podcast is under its share. */
  private admit(podcastId: string): boolean {
    if (this.byKey.size < this.cap) return true;
    const mine = this.podcasts.get(podcastId);
    const share = this.cap / (this.podcasts.size + (mine ? 0 : 1));
    if ((mine?.n ?? 0) < share && this.evictFromLargest(podcastId, share)) return true;
    this.hooks.full();
    return false;
  }

  /** Drops the oldest uncounted client of the podcast holding the most (over `share`); false when there is none. */
  private evictFromLargest(podcastId: string, share: number): boolean {
    let largest: PodcastShare | null = null;
    for (const [id, p] of this.podcasts) if (id !== podcastId && p.n > share && (!largest || p.n > largest.n)) largest = p;
    const victim = largest?.evictable.values().next().value;
    if (!largest || !victim) return false;
    largest.evictable.delete(victim);
    largest.n--;
    this.byKey.delete(`${victim.client} ${victim.episodeId}`);
    const ak = `${victim.address} ${victim.episodeId}`;
    const a = this.addresses.get(ak);
    if (a) {
      a.members.delete(victim);
      if (a.members.size === 0 && !a.shared) this.addresses.delete(ak);
    }
    this.dirty.delete(victim);
    this.evicted.push(victim);
    return true;
  }
}
