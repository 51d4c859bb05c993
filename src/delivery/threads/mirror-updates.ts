/**
 * The main thread's side of the worker threads' mirror (docs/scaling.md): it watches every hub the
 * media registry opens and, after each change of a layer (a part, a segment, the end: `Layer.onChange`),
 * posts what changed to every worker thread — the new segments, parts and init sections as views of
 * SharedArrayBuffers (each copied there once, whatever the number of threads; the copy is kept per
 * native buffer, so a restarted worker's snapshot copies nothing again), and the playlists the main
 * thread rendered once for that version (rendered into shared memory already: src/delivery/hls/source.ts).
 * Changes of one macrotask (a batch of segmenter events) go out in one message per stream, at the
 * microtask checkpoint. A sweep every second posts what changes without a layer event (a failed
 * ladder layer, the stream's policy) and drops hubs the registry let go.
 */
import type { StreamHub } from '../../live/media/hub.js';
import type { Layer } from '../../live/media/layer.js';
import type { HubSource, HubView, LayerView } from '../hls/source.js';
import { shareBytes } from '../hls/source.js';
import type { LayerUpdate, StreamUpdate } from '../hls/mirror.js';
import type { StreamPolicy } from '../listeners/hls-access.js';

/** What the mirror updates post to worker threads. */
export type MirrorMessage =
  | { t: 'stream'; u: StreamUpdate }
  | { t: 'drop'; id: string; gen: number }
  | { t: 'policy'; id: string; policy: StreamPolicy | null; station: ReadonlyArray<readonly [string, string]> };

/** What was last posted of one layer (the next message carries what came after it). */
interface Sent {
  /** Highest segment sequence number posted (-1: none). */
  lastSegment: number;
  /** Parts posted per segment sequence number. */
  parts: Map<number, number>;
  initVersion: number;
}

interface Watched {
  hub: StreamHub;
  view: HubView;
  gen: number;
  sent: Map<Layer, Sent>;
  /** Layers changed since the last post. */
  dirty: Set<Layer>;
  /** The hub's version and ended flag at the last post (a change without a layer event shows in the sweep). */
  version: number;
  policy: string;
  offs: Array<() => void>;
}

/** What MirrorUpdates reads the serving state from and posts through. */
export interface MirrorUpdatesDeps {
  /** The main thread's HLS views (rendering into shared memory). */
  source: HubSource;
  /** The hub the registry serves for a stream now (a dropped or replaced hub is let go). */
  current: (streamId: string) => StreamHub | undefined;
  /** Stream policies (account, playback, codec) the workers check requests against. */
  policy: (streamId: string) => StreamPolicy | null;
  /** A stream's station identity headers as listening sends them (`icy-name`, …). */
  station: (streamId: string) => ReadonlyArray<readonly [string, string]>;
  /** Posts a message to every worker thread. */
  post: (m: MirrorMessage) => void;
}

/** How often changes without a layer event are looked for (ms). */
const SWEEP_MS = 1000;

/**
 * The main thread's updates of the worker threads' mirror (see the top of this file): `watch` a
 * hub, `snapshot` for a new worker, `close` at shutdown. Posts through `MirrorUpdatesDeps.post`.
 */
export class MirrorUpdates {
  private readonly watched = new Map<string, Watched>();
  /** The shared copy of each native buffer posted (kept while the layer keeps the buffer). */
  private readonly shared = new WeakMap<Uint8Array, Uint8Array>();
  private readonly queued = new Set<Watched>();
  private flushQueued = false;
  private nextGen = 1;
  private sweepTimer: NodeJS.Timeout | null = null;

  constructor(private readonly d: MirrorUpdatesDeps) {}

  /** Starts mirroring `hub` (the registry opened it); a hub watched before under its id is let go. */
  watch(hub: StreamHub): void {
    const id = hub.streamId;
    const old = this.watched.get(id);
    if (old?.hub === hub) return;
    if (old) this.unwatch(old, true);
    const w: Watched = { hub, view: this.d.source.view(hub), gen: this.nextGen++, sent: new Map(), dirty: new Set(hub.layers), version: -1, policy: '', offs: [] };
    for (const l of hub.layers) {
      w.sent.set(l, { lastSegment: -1, parts: new Map(), initVersion: -1 });
      w.offs.push(l.onChange(() => this.changed(w, l)));
    }
    this.watched.set(id, w);
    this.postPolicy(w);
    this.queue(w);
    if (!this.sweepTimer) {
      this.sweepTimer = setInterval(() => this.sweep(), SWEEP_MS);
      this.sweepTimer.unref();
    }
  }

  /** Everything mirrored now, as the messages a new worker thread starts from. */
  snapshot(): MirrorMessage[] {
    const out: MirrorMessage[] = [];
    for (const w of this.watched.values()) {
      out.push({ t: 'policy', id: w.hub.streamId, policy: this.d.policy(w.hub.streamId), station: this.d.station(w.hub.streamId) });
      out.push({ t: 'stream', u: this.streamUpdate(w, w.hub.layers, true) });
    }
    return out;
  }

  /**
   * Posts stream `id`'s policy at once (a PATCH or DELETE through this process changed it), so the
   * worker threads refuse what no longer qualifies now rather than at the next sweep.
   */
  policyChanged(id: string): void {
    const w = this.watched.get(id);
    if (!w) return;
    try {
      this.postPolicy(w);
    } catch {
      // A failing policy read (database) is retried at the next sweep.
    }
  }

  /** Stops (server shutdown). */
  close(): void {
    if (this.sweepTimer) clearInterval(this.sweepTimer);
    this.sweepTimer = null;
    for (const w of [...this.watched.values()]) this.unwatch(w, false);
  }

  private changed(w: Watched, l: Layer): void {
    w.dirty.add(l);
    this.queue(w);
  }

  private queue(w: Watched): void {
    this.queued.add(w);
    if (this.flushQueued) return;
    this.flushQueued = true;
    queueMicrotask(() => this.flush());
  }

  /** Posts every queued stream's changes (one message each). */
  private flush(): void {
    this.flushQueued = false;
    const ws = [...this.queued];
    this.queued.clear();
    for (const w of ws) {
      if (this.watched.get(w.hub.streamId) !== w) continue;
      const layers = [...w.dirty];
      w.dirty.clear();
      try {
        this.d.post({ t: 'stream', u: this.streamUpdate(w, layers, false) });
      } catch {
        // A message that cannot be built or posted must not reach the native ingest callback
        // this runs after; the next change (or a restarted worker's snapshot) carries the state.
      }
    }
  }

  /** Once a second: hubs let go, hub-level changes without a layer event (a failed layer), policy changes. */
  private sweep(): void {
    for (const w of [...this.watched.values()]) {
      const id = w.hub.streamId;
      if (this.d.current(id) !== w.hub) {
        this.unwatch(w, true);
        continue;
      }
      try {
        this.postPolicy(w);
        if (w.hub.version !== w.version) this.queue(w);
      } catch {
        // A failing policy read (database) is retried at the next sweep.
      }
    }
    if (this.watched.size === 0 && this.sweepTimer) {
      clearInterval(this.sweepTimer);
      this.sweepTimer = null;
    }
  }

  private postPolicy(w: Watched): void {
    const id = w.hub.streamId;
    const policy = this.d.policy(id);
    const station = this.d.station(id);
    const key = JSON.stringify([policy, station]);
    if (key === w.policy) return;
    w.policy = key;
    this.d.post({ t: 'policy', id, policy, station });
  }

  private unwatch(w: Watched, post: boolean): void {
    for (const off of w.offs) off();
    w.offs = [];
    this.queued.delete(w);
    if (this.watched.get(w.hub.streamId) === w) this.watched.delete(w.hub.streamId);
    if (post) this.d.post({ t: 'drop', id: w.hub.streamId, gen: w.gen });
  }

  private share(b: Uint8Array): Uint8Array {
    if (b.buffer instanceof SharedArrayBuffer) return b;
    let s = this.shared.get(b);
    if (!s) this.shared.set(b, (s = shareBytes(b)));
    return s;
  }

  /** The stream's update with `layers`; `full`: everything retained (a new worker), without moving what was sent. */
  private streamUpdate(w: Watched, layers: Iterable<Layer>, full: boolean): StreamUpdate {
    const v = w.view;
    const hub = w.hub;
    if (!full) w.version = hub.version;
    const out: LayerUpdate[] = [];
    for (const l of layers) {
      const lv = v.layer(l.name);
      if (lv) out.push(this.layerUpdate(lv, full ? { lastSegment: -1, parts: new Map(), initVersion: -1 } : w.sent.get(l)!));
    }
    return {
      id: hub.streamId,
      gen: w.gen,
      ended: hub.ended,
      playable: v.playable,
      version: v.version,
      topTargetSeconds: v.topTargetSeconds,
      codec: hub.opts.codec,
      multivariant: v.multivariant(),
      layers: out,
    };
  }

  /** One layer's update: what was not posted yet (by `sent`, which moves on). */
  private layerUpdate(v: LayerView, sent: Sent): LayerUpdate {
    const l = v.layer;
    const segments: Array<[number, Uint8Array]> = [];
    const parts: Array<[number, number, Uint8Array]> = [];
    let firstPartSegment = l.nextSequence;
    const addParts = (seq: number, list: ReadonlyArray<{ index: number; data: Uint8Array }>) => {
      if (list.length === 0) return;
      firstPartSegment = Math.min(firstPartSegment, seq);
      const from = sent.parts.get(seq) ?? 0;
      for (const p of list) if (p.index >= from) parts.push([seq, p.index, this.share(p.data)]);
      sent.parts.set(seq, Math.max(from, list[list.length - 1]!.index + 1));
    };
    for (const s of l.segments) {
      addParts(s.sequence, s.parts);
      if (s.sequence > sent.lastSegment) {
        segments.push([s.sequence, this.share(s.data)]);
        sent.lastSegment = s.sequence;
      }
    }
    addParts(l.openParts[0]?.sequence ?? l.nextSequence, l.openParts);
    for (const seq of sent.parts.keys()) if (seq < firstPartSegment) sent.parts.delete(seq);
    const u: LayerUpdate = {
      name: l.name,
      kbps: l.o.kbps,
      container: l.o.container,
      lowLatency: l.lowLatency,
      waitMs: 3 * l.o.targetDurationMs,
      unitMs: l.lowLatency ? l.o.partTargetMs : l.o.targetDurationMs,
      version: l.version,
      failed: l.failed,
      ready: l.ready,
      ended: l.ended,
      nextSequence: l.nextSequence,
      targetSeconds: v.targetSeconds,
      initVersion: l.initVersion,
      initId: l.initId,
      segments,
      parts,
      firstSegment: l.segments[0]?.sequence ?? l.nextSequence,
      firstPartSegment,
      playlist: v.playlist(),
      delta: l.lowLatency ? v.deltaPlaylist() : null,
    };
    if (sent.initVersion !== l.initVersion) {
      u.init = l.init ? this.share(l.init) : null;
      sent.initVersion = l.initVersion;
    }
    return u;
  }
}
