/**
 * The podcast download counter (docs/podcasts.md "Download counting"). A download is one client —
 * its address group (IPv4; IPv6 by /64; IPv4-mapped as IPv4) plus its User-Agent — that was sent
 * at least the episode's first minute of bytes (`audio_minute_bytes`) in one UTC day, summed over
 * all its responses (full GETs and ranges) of that day. Bytes are those the HTTP layer reports
 * written, as they go, so a download reached while a response runs past midnight counts on the
 * day the minute was reached. Known bots and Skylark itself count as bot requests instead.
 *
 * An address group showing more than 10 User-Agents on one episode in a day is one client, and the
 * daily client cap is shared fairly per podcast (src/control/downloads/day-clients.ts).
 *
 * Clients are known only by HMAC-SHA-256 (RFC 2104) of (address group, User-Agent, day) — and
 * address groups by HMAC of (address group, day) — under a random secret of the day, kept in memory and in SQLite for that day only (so a restart the same
 * day, even after `kill -9`, recognises a client and neither forgets its bytes nor counts it
 * twice) and deleted when the day closes. No address or User-Agent is written anywhere.
 *
 * Nothing is written per request: client progress, new downloads and bot requests are batched and
 * written every `flushMs` in one transaction (and at `flush()`, `close()`), so a crash loses at
 * most the last interval's bytes — an undercount, never a double count, as a client's `counted`
 * flag and its download are written together.
 */
import { createHmac, randomBytes } from 'node:crypto';
import type { DownloadBatch, DownloadCountKey, DownloadsRepo } from '../../base/db/downloads-repo.js';
import { addressGroup } from '../../base/limits/address-key.js';
import { countryOf } from '../../base/geo.js';
import type { Logger } from '../../base/logger.js';
import { classifyUserAgent, type ClientKind } from './user-agents.js';
import { DayClients, type ClientState } from './day-clients.js';

const DAY_MS = 86_400_000;

/** `YYYY-MM-DD` (UTC) of a time in ms since the epoch. */
export const utcDay = (ms: number) => new Date(Math.floor(ms / DAY_MS) * DAY_MS).toISOString().slice(0, 10);

/** Responses of at most this many bytes add nothing (`Range: bytes=0-1` probes players send first). */
export const PROBE_MAX_BYTES = 2;

/** What the counter needs to know of one response for an episode's audio. */
export interface AudioRequest {
  podcastId: string;
  episodeId: string;
  /** Bytes of the episode's first minute (`minuteBytes`). */
  minuteBytes: number;
  /** The client address (the socket peer, or the trusted proxies' `X-Forwarded-For` client). Held in memory only. */
  ip: string;
  userAgent: string;
}

export interface DownloadCounterOptions {
  repo: DownloadsRepo;
  log: Logger;
  now?: () => number;
  /** How often batches are written (ms, default 5000). */
  flushMs?: number;
  /**
   * Clients (client × episode) a day tracks at most (default `MAX_CLIENTS_PER_DAY`): past it, a
   * new client of the day is served uncounted unless its podcast holds less than its fair share
   * (then it replaces the largest podcast's oldest uncounted client), so no stream of made-up
   * addresses or User-Agents can grow the memory or the table without bound, nor stop another
   * podcast's counting. Logged once a day when a client is refused.
   */
  maxClientsPerDay?: number;
}

/** The default cap on a day's tracked clients: ~150 bytes each in memory, ~75 MB at the cap. */
export const MAX_CLIENTS_PER_DAY = 500_000;

/** Counts podcast downloads; see the file's comment. One per process, on the main thread. */
export class DownloadCounter {
  private readonly now: () => number;
  private day = '';
  private dayNumber = -1;
  private secret: Buffer = Buffer.alloc(0);
  /** The current day's clients. */
  private clients: DayClients;
  private counts = new Map<string, DownloadCountKey & { n: number }>();
  private bots = new Map<string, { podcastId: string; day: string; episodeId: string; n: number }>();
  private timer: NodeJS.Timeout | null = null;
  /** Downloads counted since the process started (docs/metrics.md `skylark_downloads_counted_total`). */
  countedTotal = 0;
  /** The day whose client cap was reached (logged once). */
  private fullDay = '';

  constructor(private readonly o: DownloadCounterOptions) {
    this.now = o.now ?? Date.now;
    this.clients = this.newDay();
  }

  private newDay(): DayClients {
    return new DayClients(this.o.maxClientsPerDay ?? MAX_CLIENTS_PER_DAY, {
      full: () => {
        if (this.fullDay !== this.day) this.o.log.warn("download counting: the day's client cap is reached; new clients are served uncounted until midnight UTC", { day: this.day, clients: this.clients.size });
        this.fullDay = this.day;
      },
      retract: (countedAs) => this.addCount(JSON.parse(countedAs) as DownloadCountKey, -1),
    });
  }

  /** Adds `n` (±1) downloads to the pending counts under `key`. */
  private addCount(key: DownloadCountKey, n: number): void {
    const k = JSON.stringify([key.podcastId, key.day, key.episodeId, key.app, key.device, key.os, key.country]);
    const c = this.counts.get(k);
    if (c) c.n += n;
    else this.counts.set(k, { ...key, n });
  }

  /** Opens today's state from the database (drops closed days) and starts the batch timer. */
  start(): void {
    this.roll();
    this.timer = setInterval(() => {
      this.roll();
      this.flush();
    }, this.o.flushMs ?? 5000);
    this.timer.unref();
  }

  /**
   * One request for an episode's audio. A bot's (GET or HEAD, whatever it is answered) is counted
   * as a bot request and answers undefined, as does a HEAD. A client's GET answers what the HTTP
   * layer calls when it streams a body of `length` bytes: null for a probe (`PROBE_MAX_BYTES` or
   * less), else the function told the body bytes written as they go (each call: the bytes
   * written since the previous one).
   */
  request(r: AudioRequest, method: 'GET' | 'HEAD'): ((length: number) => ((bytes: number) => void) | null) | undefined {
    this.roll();
    if (this.day === '') return undefined; // the day's state could not be opened (logged): serve uncounted
    const kind = classifyUserAgent(r.userAgent);
    if (kind.bot) {
      const k = `${r.podcastId} ${this.day} ${r.episodeId}`;
      const b = this.bots.get(k);
      if (b) b.n++;
      else this.bots.set(k, { podcastId: r.podcastId, day: this.day, episodeId: r.episodeId, n: 1 });
      return undefined;
    }
    if (method !== 'GET') return undefined;
    return (length) => (length <= PROBE_MAX_BYTES ? null : this.sink(r, kind));
  }

  /** The byte sink of one response of a (non-bot) client. */
  private sink(r: AudioRequest, kind: ClientKind): (bytes: number) => void {
    const group = addressGroup(r.ip);
    let state: ClientState | null = null;
    let stateDay = -1;
    // Called from the HTTP layer's write path: it must never throw.
    return (bytes: number) => {
      if (bytes <= 0) return;
      this.roll();
      // A response running past midnight goes on as the same client's progress of the new day.
      if (!state || stateDay !== this.dayNumber) {
        state = this.client(group, r);
        stateDay = this.dayNumber;
      }
      // A User-Agent merged into its address (more than 10 on the episode today) adds to the address.
      while (state?.into) state = state.into;
      if (!state || state.counted) return;
      state.bytes += bytes;
      this.clients.changed(state);
      if (state.bytes < r.minuteBytes) return;
      this.countedTotal++;
      const country = countryOf(r.ip) ?? '';
      const key: DownloadCountKey = { podcastId: r.podcastId, day: this.day, episodeId: r.episodeId, app: kind.app ?? '', device: kind.device ?? '', os: kind.os ?? '', country };
      this.clients.counted(state, JSON.stringify(key));
      this.addCount(key, 1);
    };
  }

  /** The state of a client (by address group and User-Agent) for an episode today; null when the day's cap leaves no room. */
  private client(group: string, r: AudioRequest): ClientState | null {
    const hash = (s: string) => createHmac('sha256', this.secret).update(s).digest('base64url').slice(0, 32);
    const client = hash(`${group}\n${r.userAgent}\n${this.day}`);
    // No User-Agent holds a newline (HTTP field values cannot), so this never equals a client's input.
    const address = hash(`${group}\n\n${this.day}\naddress`);
    return this.clients.find(address, client, r.episodeId, r.podcastId);
  }

  /**
   * Moves to the current UTC day when it changed: writes what the closing day still holds, then
   * opens the new day (a new secret unless a restart finds the day's; closed days' secrets and
   * client progress are deleted). Never throws: a database failure is logged and retried on the
   * next call. @returns whether the day changed
   */
  private roll(): boolean {
    const n = Math.floor(this.now() / DAY_MS);
    if (n === this.dayNumber) return false;
    this.flush();
    const day = utcDay(n * DAY_MS);
    let opened: ReturnType<DownloadsRepo['openDay']>;
    try {
      opened = this.o.repo.openDay(day, () => randomBytes(32));
    } catch (e) {
      // Retried on the next call; until then the previous day's state (if any) goes on counting.
      this.o.log.warn('the download counting day could not be opened; retrying', { day, err: e instanceof Error ? e.message : String(e) });
      return false;
    }
    this.day = day;
    this.dayNumber = n;
    this.secret = opened.secret;
    this.clients = this.newDay();
    this.clients.load(
      opened.clients.map((c) => ({
        client: c.client,
        address: c.address,
        episodeId: c.episode_id,
        podcastId: c.podcast_id ?? '',
        bytes: c.bytes,
        counted: c.counted === 1,
        countedAs: c.counted_as,
        into: null,
      })),
    );
    return true;
  }

  /** Writes the pending batch (client progress, downloads, bot requests) in one transaction; on failure keeps it for the next try. */
  flush(): void {
    const changes = this.clients.takeChanges();
    if (changes.changed.length === 0 && changes.evicted.length === 0 && this.counts.size === 0 && this.bots.size === 0) return;
    const batch: DownloadBatch = {
      day: this.day,
      clients: changes.changed.map((s) => ({ client: s.client, address: s.address, episode_id: s.episodeId, bytes: s.bytes, counted: s.counted ? 1 : 0, counted_as: s.countedAs })),
      evicted: changes.evicted.map((s) => ({ client: s.client, episode_id: s.episodeId })),
      counts: [...this.counts.values()].filter((c) => c.n !== 0),
      bots: [...this.bots.values()],
    };
    try {
      this.o.repo.write(batch);
    } catch (e) {
      this.clients.restoreChanges(changes);
      this.o.log.warn('download counts could not be written; retrying', { err: e instanceof Error ? e.message : String(e) });
      return;
    }
    this.counts.clear();
    this.bots.clear();
  }

  /** Stops the timer and writes what is pending. */
  close(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.flush();
  }
}
