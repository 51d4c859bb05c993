/**
 * The composition root's base plane (src/main.ts calls it first): the database and its
 * repositories, the node secret, the limits, the outbox, the write retry, the HTTP server (with its
 * Idempotency-Key store) and the Guard. Everything the live, delivery and control planes are built from (src/app/live.ts,
 * src/app/delivery.ts, src/app/control.ts).
 */
import { resolvePublicUrls, type Config, type PublicUrls } from '../base/config.js';
import { openDatabase, SERVER_BUSY_TIMEOUT_MS, type Database } from '../base/db/database.js';
import { MIGRATIONS } from '../base/db/migrations.js';
import { AccountsRepo } from '../base/db/accounts-repo.js';
import { StreamsRepo } from '../base/db/streams-repo.js';
import { EventsRepo } from '../base/db/events-repo.js';
import { PodcastsRepo } from '../base/db/podcasts-repo.js';
import { WebhooksRepo } from '../base/db/webhooks-repo.js';
import { OAuthRepo } from '../base/db/oauth-repo.js';
import { Outbox } from '../base/outbox.js';
import { loadNodeSecret } from '../base/auth/secrets.js';
import { Guard } from '../base/auth/guard.js';
import { HttpServer } from '../base/http/server.js';
import { IdempotencyStore } from '../base/http/idempotency.js';
import type { Logger } from '../base/logger.js';
import { Limits } from '../base/limits/limits.js';
import { WriteRetry } from '../base/db/write-retry.js';
import { DiskReserve, DISK_RESERVE_FILE } from '../base/disk-reserve.js';
import path from 'node:path';

/** The repositories shared by more than one plane (each plane builds the ones only it uses). */
export interface Repos {
  accounts: AccountsRepo;
  streams: StreamsRepo;
  podcasts: PodcastsRepo;
  webhooks: WebhooksRepo;
  oauth: OAuthRepo;
}

/** The ports the node listens on, as bound. */
export interface BoundPorts {
  http: number;
  rtmp: number;
  icecast: number;
}

/** What `/metrics` reads of the HTTP worker threads: each one's answers by route class and status (src/base/http/tally.ts). */
export interface ThreadTallies {
  counts(): Promise<Map<number, { http?: Array<[number, number]> }>>;
}

/**
 * What the node knows only once it listens (port 0 is the kernel's pick, docs/configuration.md):
 * the bound ports, the public URLs made from them, and the HTTP worker threads. One handle, built
 * with the base plane and given at construction to everything that reads it in handlers, timers
 * and scrapes; the listening step of the composition root (src/main.ts) fills it once when every
 * port is bound, and `close` takes the ports and threads back when the node stops listening.
 */
export class Listening {
  private publicUrls: PublicUrls | null = null;
  private bound: { ports: BoundPorts; threads: ThreadTallies | null } | null = null;

  constructor(private readonly config: Config) {}

  /** The public URLs. @throws Error before listening (call it in handlers and timers only). */
  readonly urls = (): PublicUrls => {
    if (!this.publicUrls) throw new Error('public URLs are not known before listening');
    return this.publicUrls;
  };

  /** The bound ports, or null before listening and after close. */
  get ports(): BoundPorts | null {
    return this.bound?.ports ?? null;
  }

  /** The HTTP worker threads (null: the main thread serves alone, or not listening). */
  get threads(): ThreadTallies | null {
    return this.bound?.threads ?? null;
  }

  /** Every port is bound (src/main.ts, once). @returns the public URLs, now known */
  listened(ports: BoundPorts, threads: ThreadTallies | null): PublicUrls {
    this.bound = { ports, threads };
    return (this.publicUrls = resolvePublicUrls(this.config, ports.http, ports.rtmp, ports.icecast));
  }

  /** The node stopped listening (the URLs stay, for what still runs during the stop). */
  close(): void {
    this.bound = null;
  }
}

/** The base plane, built. */
export interface Base {
  config: Config;
  log: Logger;
  now: () => number;
  db: Database;
  /** The node secret (32 bytes) from `<dataDir>/secret.key`. */
  nodeSecret: Buffer;
  repos: Repos;
  outbox: Outbox;
  /** Counts and logs hits of the node's limits (docs/behaviour.md §13). */
  limits: Limits;
  /** Writes SQLite cannot take now are retried in order (live-path writes). */
  writes: WriteRetry;
  http: HttpServer;
  guard: Guard;
  /** What is known once listening: the public URLs (`listening.urls`), the bound ports, the HTTP threads. */
  listening: Listening;
}

/**
 * Opens the database (migrating it) and builds the base plane.
 * @throws Error when the database or the node secret cannot be opened.
 */
export function buildBase(config: Config, log: Logger, now: () => number): Base {
  const db = openDatabase(config.dataDir, MIGRATIONS, { busyTimeoutMs: SERVER_BUSY_TIMEOUT_MS });
  const nodeSecret = loadNodeSecret(config.dataDir);
  const repos: Repos = {
    accounts: new AccountsRepo(db),
    streams: new StreamsRepo(db),
    podcasts: new PodcastsRepo(db),
    webhooks: new WebhooksRepo(db),
    oauth: new OAuthRepo(db),
  };
  const limits = new Limits(log.child('limits'), now);
  const listening = new Listening(config);
  const http = new HttpServer({ maxJsonBodyBytes: config.maxJsonBodyBytes, log: log.child('http'), limits, idempotency: new IdempotencyStore(db, nodeSecret, now) });
  const guard = new Guard(repos.accounts, { oauth: repos.oauth, nodeSecret, urls: listening.urls, now, trustedProxies: config.trustedProxies });
  // Released when SQLite finds the disk full, so the live path's records still commit (docs/behaviour.md §13).
  const reserve = new DiskReserve(path.join(config.dataDir, DISK_RESERVE_FILE), config.limits.minFreeDiskBytes, log.child('db'));
  reserve.ensure();
  return {
    config,
    log,
    now,
    db,
    nodeSecret,
    repos,
    outbox: new Outbox(new EventsRepo(db), now),
    limits,
    writes: new WriteRetry(db, log.child('db'), limits, SERVER_BUSY_TIMEOUT_MS, reserve),
    http,
    guard,
    listening,
  };
}
