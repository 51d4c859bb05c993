/**
 * Composition root: opens the database, wires services, the HTTP server (API + HLS) and the RTMP
 * ingest server, and starts listening. `startServer` is what `skylark serve` and the tests run.
 */
import type { Config, PublicUrls } from './config/config.js';
import { resolvePublicUrls } from './config/config.js';
import { openDatabase, type Database } from './db/database.js';
import { AccountsRepo } from './db/accounts-repo.js';
import { StreamsRepo } from './db/streams-repo.js';
import { EventsRepo } from './db/events-repo.js';
import { Outbox } from './events/outbox.js';
import { loadNodeSecret } from './auth/secrets.js';
import { AccountsService } from './services/accounts.js';
import { StreamsService } from './services/streams.js';
import { LiveService } from './services/live.js';
import { MediaRegistry } from './media/hub.js';
import { TsSegmenter } from './native/index.js';
import { HttpServer } from './http/server.js';
import { registerStreamRoutes } from './api/streams/routes.js';
import { registerHlsRoutes } from './hls/routes.js';
import { RtmpServer } from './ingest/rtmp-server.js';
import type { Logger } from './log/logger.js';

/** A running server. Ports as bound. */
export interface RunningServer {
  httpPort: number;
  rtmpPort: number;
  urls: PublicUrls;
  db: Database;
  outbox: Outbox;
  accounts: AccountsService;
  /** Stops listening, ends timers and closes the database. */
  close(): Promise<void>;
}

/**
 * Starts Skylark with `config`.
 * @throws Error when a port cannot be bound or the database cannot be opened.
 */
export async function startServer(config: Config, log: Logger): Promise<RunningServer> {
  const db = openDatabase(config.dataDir);
  const nodeSecret = loadNodeSecret(config.dataDir);
  const accountsRepo = new AccountsRepo(db);
  const streamsRepo = new StreamsRepo(db);
  const outbox = new Outbox(new EventsRepo(db));
  const media = new MediaRegistry();
  let urls: PublicUrls | null = null;
  const getUrls = () => {
    if (!urls) throw new Error('public URLs are not known before listening');
    return urls;
  };

  const live = new LiveService({
    db,
    streams: streamsRepo,
    outbox,
    media,
    log: log.child('live'),
    urls: getUrls,
    createSegmenter: () => new TsSegmenter({ targetDurationMs: config.segmentDurationMs }),
    segmentDurationMs: config.segmentDurationMs,
    windowSegments: config.liveWindowSegments,
  });
  const accounts = new AccountsService(accountsRepo);
  const streams = new StreamsService({ streams: streamsRepo, accounts: accountsRepo, nodeSecret, urls: getUrls, live });

  const http = new HttpServer({ maxJsonBodyBytes: config.maxJsonBodyBytes, log: log.child('http') });
  registerStreamRoutes(http, streams, accountsRepo);
  registerHlsRoutes(http, media);
  http.finish();

  const rtmp = new RtmpServer(live, log.child('rtmp'));
  let httpPort: number;
  let rtmpPort: number;
  try {
    httpPort = await http.listen(config.httpHost, config.httpPort);
    rtmpPort = await rtmp.listen(config.rtmpHost, config.rtmpPort);
  } catch (e) {
    http.close();
    await rtmp.close().catch(() => {});
    db.close();
    throw e;
  }
  urls = resolvePublicUrls(config, httpPort, rtmpPort);
  live.recover();

  return {
    httpPort,
    rtmpPort,
    urls,
    db,
    outbox,
    accounts,
    async close() {
      http.close();
      await rtmp.close();
      live.close();
      db.close();
    },
  };
}
