/**
 * The composition root's catch-up room (docs/behaviour.md "Catch-up radio"): the archive that keeps
 * each stream's window of segments on disk in layer-hour files (indexed in memory), watching every
 * hub opened, and the catch-up addresses under `/hls/<id>/` (served by the main thread: worker threads forward
 * them, src/delivery/threads/worker.ts).
 */
import path from 'node:path';
import type { Base } from './base.js';
import type { Feature } from '../base/background.js';
import type { Listeners } from '../delivery/listeners/room.js';
import type { MediaRegistry } from '../live/media/registry.js';
import type { HubSource } from '../delivery/hls/source.js';
import type { StreamError } from '../live/ports.js';
import { CatchUpRepo } from '../base/db/catch-up-repo.js';
import { BroadcastsRepo } from '../base/db/broadcasts-repo.js';
import { CatchUpArchive } from '../delivery/catch-up/archive.js';
import { registerCatchUpRoutes } from '../delivery/catch-up/routes.js';
import { catchUpListen } from '../delivery/catch-up/progressive.js';
import type { ListenFeature } from '../delivery/progressive/main-routes.js';

/** The catch-up room, built: the archive (tests wait on its queue) and its feature (stops the sweep). */
export interface CatchUp {
  archive: CatchUpArchive;
  feature: Feature;
}

/**
 * Builds the archive (`<dataDir>/catch-up`) over the hubs of `media` and registers the catch-up
 * routes; `error` reports `stream.error` (the stream lifecycle's); `listen` (the listening routes)
 * is handed the `?start=` requests of progressive listening.
 * @throws Error when the directory cannot be created
 */
export function buildCatchUp(b: Base, room: Listeners, media: MediaRegistry, source: HubSource, error: (streamId: string, e: StreamError) => void, listen?: Pick<ListenFeature, 'useCatchUp'>): CatchUp {
  const repo = new CatchUpRepo(b.db);
  const broadcasts = new BroadcastsRepo(b.db);
  const openBroadcast = (id: string) => broadcasts.open(id)?.id ?? null;
  const archive = new CatchUpArchive({
    repo,
    dir: path.join(b.config.dataDir, 'catch-up'),
    broadcastOf: openBroadcast,
    minFreeDiskBytes: b.config.limits.minFreeDiskBytes,
    error,
    log: b.log.child('catch-up'),
    now: b.now,
  });
  media.onOpen((hub) => archive.watch(hub));
  registerCatchUpRoutes(b.http, {
    repo,
    archive,
    source,
    access: room.access,
    openBroadcast,
    codecOf: (id) => b.repos.streams.getAny(id)?.codec ?? null,
    targetDurationMs: b.config.segmentDurationMs,
    now: b.now,
  });
  // `/listen/<id>.<ext>?start=<t>` and the Icecast port's mounts with `?start=` (docs/behaviour.md §17).
  const codecOf = (id: string) => b.repos.streams.getAny(id)?.codec ?? null;
  listen?.useCatchUp((c) => catchUpListen({ repo, archive, media, registry: room.registry, codecOf, log: b.log.child('catch-up'), now: b.now }, c));
  return { archive, feature: { close: () => archive.close() } };
}
