/**
 * LL-HLS parts answered in native code (docs/http.md "Media objects answered in native code").
 *
 * An hls.js-like LL-HLS listener sends two requests per part: a blocking playlist reload and the
 * part itself. The part GET of a public stream is the same immutable bytes for every listener, so
 * it need not reach JavaScript at all: this keeps the native HTTP front's object store (one entry
 * per retained part, path → status line, headers and bytes) equal to what `mediaObject` in
 * ./routes.ts would answer, and the front answers a plain GET of a stored path itself. Requests it
 * does not answer (HEAD, ranges, a query, a token stream, a part not stored, anything unusual)
 * reach ./routes.ts as before, which stays the reference for every answer.
 *
 * What is stored, per layer of every hub the registry opens: each part that the HLS view of the
 * layer serves (`HlsLayerView.part`), while its stream is public (`playback` not `token`, checked
 * at every change and once a second) and the layer is served (not failed). A stream that is
 * updated or deleted (`changes`) loses its entries synchronously with the write: no request after a
 * PATCH to `playback: "token"` or a DELETE is answered from the store. It is synced after every change of the layer
 * (a part, a segment, the end: `Layer.onChange`), so a part is stored from the moment it is listed
 * and removed when the layer drops it (then its request reaches ./routes.ts and is a 404, as
 * before). A hub the registry lets go, and every hub at `close`, loses its entries.
 *
 * Cost: one copy of each part's bytes into native memory (≈ 8 KB per 0.5 s part at 128 kbps;
 * ≈ 16 parts retained per layer), one `put` per new part and one `delete` per dropped part.
 */
import type { StreamHub } from '../../live/media/hub.js';
import type { Layer } from '../../live/media/layer.js';
import type { HlsSource } from './source.js';
import type { NativeReloads } from './native-reloads.js';

/** The native object store (src/native/http-front.ts `putHttpObject`/`deleteHttpObject`). */
export interface ObjectStore {
  /** Stores the answer to `GET path`: `head` = status line and headers up to the request id's prefix. @returns false when refused */
  put(path: string, head: Uint8Array, body: Uint8Array): boolean;
  delete(path: string): boolean;
}

/** What NativeParts reads and writes. */
export interface NativePartsDeps {
  store: ObjectStore;
  /** What ./routes.ts serves from (the main thread's HLS views). */
  source: HlsSource;
  /** Whether a stream's objects are public (no token needed: the same bytes for everyone). */
  isPublic: (streamId: string) => boolean;
  /** The hub the registry serves for a stream now (a dropped or replaced hub is let go). */
  current: (streamId: string) => StreamHub | undefined;
  /** The head of a public part's answer (`publicPartHead` of ./routes.ts). */
  head: Uint8Array;
  /**
   * Subscribes to writes of a stream that may change what it allows (`StreamsRepo.onChange`: a
   * PATCH, a DELETE), called synchronously with the write; returns the unsubscribe. None: only the
   * once-a-second sweep notices such changes.
   */
  changes?: (fn: (streamId: string) => void) => () => void;
  /** The layers' blocking reloads held in the front (./native-reloads.ts), synced with the parts; none: not held there. */
  reloads?: Pick<NativeReloads, 'sync' | 'withdraw'> | undefined;
}

/** Finished segments below the one in progress whose parts are looked for (a layer keeps ~3). */
const SEGMENTS_BACK = 5;
/** How often a stream's policy and the registry's hubs are looked at without a layer event (ms). */
const SWEEP_MS = 1000;

interface Watched {
  hub: StreamHub;
  /** Per layer: stored path → the bytes stored under it. */
  stored: Map<Layer, Map<string, Uint8Array>>;
  offs: Array<() => void>;
}

/**
 * Keeps the native object store equal to the public LL-HLS parts the HLS routes serve (see the
 * top of this file). `watch` each hub the registry opens; `close` at shutdown removes every entry.
 */
export class NativeParts {
  private readonly watched = new Map<string, Watched>();
  private sweepTimer: NodeJS.Timeout | null = null;
  private readonly offChanges: (() => void) | null;

  constructor(private readonly d: NativePartsDeps) {
    this.offChanges = d.changes?.((id) => this.streamChanged(id)) ?? null;
  }

  /**
   * Stream `streamId` was written (its playback or existence may have changed): its stored parts
   * are forgotten now, synchronously with the write, so no request after it is answered from the
   * store; they are stored again, after the other listeners of the write have dropped their cached
   * policy, if the stream is still public.
   */
  streamChanged(streamId: string): void {
    const w = this.watched.get(streamId);
    if (!w) return;
    for (const l of w.stored.keys()) this.forgetLayer(w, l);
    queueMicrotask(() => {
      if (this.watched.get(streamId) !== w) return;
      for (const l of w.stored.keys()) this.changed(w, l);
    });
  }

  /** Starts storing `hub`'s parts; a hub watched before under its id is let go. */
  watch(hub: StreamHub): void {
    const id = hub.streamId;
    const old = this.watched.get(id);
    if (old?.hub === hub) return;
    if (old) this.unwatch(old);
    const w: Watched = { hub, stored: new Map(), offs: [] };
    for (const l of hub.layers) {
      if (!l.lowLatency) continue;
      w.stored.set(l, new Map());
      w.offs.push(l.onChange(() => this.changed(w, l)));
    }
    if (w.stored.size === 0) return;
    this.watched.set(id, w);
    for (const l of w.stored.keys()) this.changed(w, l);
    if (!this.sweepTimer) {
      this.sweepTimer = setInterval(() => this.sweep(), SWEEP_MS);
      this.sweepTimer.unref();
    }
  }

  /** Parts stored now (tests, diagnostics). */
  get size(): number {
    let n = 0;
    for (const w of this.watched.values()) for (const m of w.stored.values()) n += m.size;
    return n;
  }

  /** Removes every entry and stops (server shutdown). */
  close(): void {
    this.offChanges?.();
    if (this.sweepTimer) clearInterval(this.sweepTimer);
    this.sweepTimer = null;
    for (const w of [...this.watched.values()]) this.unwatch(w);
  }

  /** After a change of `l` (inside the segmenter's callback: nothing may escape from here). */
  private changed(w: Watched, l: Layer): void {
    try {
      this.sync(w, l);
    } catch {
      // A failing policy read (database): the routes answer this layer's parts until the next sync.
      this.forgetLayer(w, l);
    }
  }

  /** Makes the store hold exactly the parts of `l` that the routes serve now. @throws Error when the policy cannot be read */
  private sync(w: Watched, l: Layer): void {
    const have = w.stored.get(l)!;
    const id = w.hub.streamId;
    const stream = this.watched.get(id) === w && this.d.isPublic(id) ? this.d.source.get(id) : undefined;
    const view = stream?.layer(l.name);
    this.d.reloads?.sync(reloadPath(id, l), view, stream?.playable ?? false);
    if (!view || view.container !== 'fmp4') return this.forget(have);
    const base = `/hls/${id}/${l.name}/`;
    const seen = new Set<string>();
    const last = view.nextSequence;
    for (let seq = last; seq >= 0 && seq >= last - SEGMENTS_BACK; seq--) {
      for (let index = 0; ; index++) {
        const bytes = view.part(seq, index);
        if (!bytes) break;
        const path = `${base}${seq}.${index}.m4s`;
        seen.add(path);
        if (have.get(path) === bytes) continue;
        if (this.d.store.put(path, this.d.head, bytes)) have.set(path, bytes);
        else have.delete(path);
      }
    }
    for (const path of have.keys()) {
      if (seen.has(path)) continue;
      this.d.store.delete(path);
      have.delete(path);
    }
  }

  /** Forgets the parts of `l` and withdraws its blocking reloads. */
  private forgetLayer(w: Watched, l: Layer): void {
    this.forget(w.stored.get(l)!);
    this.d.reloads?.withdraw(reloadPath(w.hub.streamId, l));
  }

  private forget(have: Map<string, Uint8Array>): void {
    for (const path of have.keys()) this.d.store.delete(path);
    have.clear();
  }

  /** Once a second: hubs let go, and policy or layer changes that came without a layer event. */
  private sweep(): void {
    for (const w of [...this.watched.values()]) {
      if (this.d.current(w.hub.streamId) !== w.hub) {
        this.unwatch(w);
        continue;
      }
      for (const l of w.stored.keys()) this.changed(w, l);
    }
    if (this.watched.size === 0 && this.sweepTimer) {
      clearInterval(this.sweepTimer);
      this.sweepTimer = null;
    }
  }

  private unwatch(w: Watched): void {
    for (const off of w.offs) off();
    w.offs = [];
    if (this.watched.get(w.hub.streamId) === w) this.watched.delete(w.hub.streamId);
    for (const l of w.stored.keys()) this.forgetLayer(w, l);
  }
}

/** The media playlist path of layer `l` of stream `id` (what the front's held reloads are keyed by). */
const reloadPath = (id: string, l: Layer): string => `/hls/${id}/${l.name}/index.m3u8`;
