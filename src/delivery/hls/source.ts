/**
 * What HLS serving reads of a stream, whichever thread serves it (docs/scaling.md): on the main
 * thread the hub and its layers themselves (`HubSource` here), on a worker thread their mirror
 * fed by the main thread (src/delivery/hls/mirror.ts). src/delivery/hls/routes.ts serves from either.
 *
 * The main thread's views render each playlist — and an LL-HLS layer's delta update — once per
 * version (the layer's `version`), for its own answers and for every worker thread's: with `shared` set, the rendered bytes are put into a
 * SharedArrayBuffer at that one render, and the mirror updates (src/delivery/threads/mirror-updates.ts) post them as they
 * are (the memory is shared, not copied).
 */
import type { StreamHub } from '../../live/media/hub.js';
import type { Layer } from '../../live/media/layer.js';
import type { MediaRegistry } from '../../live/media/registry.js';
import { mediaTemplate, multivariantTemplate, skippedSegments, targetDurationSeconds, type Template } from './playlists.js';

/** One layer (rendition) as HLS serves it. Durations in s, sequence numbers as in the playlist. */
export interface HlsLayerView {
  readonly name: string;
  /** The ladder gave up on this layer: not served. */
  readonly failed: boolean;
  /** Playable: configured and holding a segment (LL-HLS: a part). */
  readonly ready: boolean;
  readonly ended: boolean;
  /** LL-HLS is on (parts, blocking reload). */
  readonly lowLatency: boolean;
  readonly container: 'ts' | 'fmp4';
  /** Media sequence number of the segment in progress. */
  readonly nextSequence: number;
  /** Parts of the segment in progress. */
  readonly openParts: number;
  /** The fMP4 init section (EXT-X-MAP), or null. */
  readonly init: Uint8Array | null;
  readonly initVersion: number;
  /** What names the init section's URI (`init-<initId>.mp4`: its content's hash; '' before it). */
  readonly initId: string;
  /** EXT-X-TARGETDURATION (s). */
  readonly targetSeconds: number;
  /** Bumped on every change a playlist shows. */
  readonly version: number;
  /** Whether segment `msn` is finished or, given `part`, that part exists (or never will: its segment is finished). */
  has(msn: number, part?: number): boolean;
  /**
   * Whether the playlist holds what the blocking playlist reload `_HLS_msn=msn[&_HLS_part=part]`
   * waits for (rfc8216bis §6.2.5.2): a part index past the last part of a finished segment is
   * part 0 of the next segment.
   */
  reached(msn: number, part?: number): boolean;
  /**
   * Calls `done` once `has(msn, part)` (`reload`: once `reached(msn, part)`), the layer ends, or
   * 3 target durations pass. Returns the cancel function.
   */
  waitFor(msn: number, part: number | undefined, done: () => void, reload?: boolean): () => void;
  /** A retained segment's bytes by media sequence number. */
  segment(sequence: number): Uint8Array | undefined;
  /** A retained part's bytes. */
  part(sequence: number, index: number): Uint8Array | undefined;
  /** The media playlist of the current version. */
  playlist(): Template;
  /**
   * The delta update of the current version (`_HLS_skip=YES`, rfc8216bis §6.2.5.1), or null when
   * it would skip nothing (then the playlist itself is the answer).
   */
  deltaPlaylist(): Template | null;
}

/** One stream as HLS serves it. */
export interface HlsStreamView {
  readonly ended: boolean;
  /** The top (passthrough) layer is ready: the stream's layers may be served. */
  readonly playable: boolean;
  /** Changes whenever the multivariant playlist would. */
  readonly version: number;
  /** EXT-X-TARGETDURATION of the top layer (s). */
  readonly topTargetSeconds: number;
  layer(name: string): HlsLayerView | undefined;
  /** The multivariant playlist of the current version; null while no layer is listed. */
  multivariant(): Template | null;
}

/** Streams by id. */
export interface HlsSource {
  get(streamId: string): HlsStreamView | undefined;
}

/** Copies `b` into a new SharedArrayBuffer (one copy for every thread). */
export function shareBytes(b: Uint8Array): Uint8Array {
  const out = new Uint8Array(new SharedArrayBuffer(b.byteLength));
  out.set(b);
  return out;
}

/** A rendered template whose bytes live in a SharedArrayBuffer. */
const shareTemplate = (t: Template): Template => ({ plain: shareBytes(t.plain), slots: t.slots });

/** A main-thread `Layer` as HLS serves it; renders its playlist once per version. */
export class LayerView implements HlsLayerView {
  private rendered: Template | null = null;
  private renderedVersion = -1;
  private delta: Template | null = null;
  private deltaVersion = -1;

  constructor(readonly layer: Layer, private readonly shared: boolean) {}

  get name(): string {
    return this.layer.name;
  }
  get failed(): boolean {
    return this.layer.failed;
  }
  get ready(): boolean {
    return this.layer.ready;
  }
  get ended(): boolean {
    return this.layer.ended;
  }
  get lowLatency(): boolean {
    return this.layer.lowLatency;
  }
  get container(): 'ts' | 'fmp4' {
    return this.layer.o.container;
  }
  get nextSequence(): number {
    return this.layer.nextSequence;
  }
  get openParts(): number {
    return this.layer.openParts.length;
  }
  get init(): Uint8Array | null {
    return this.layer.init;
  }
  get initVersion(): number {
    return this.layer.initVersion;
  }
  get initId(): string {
    return this.layer.initId;
  }
  get targetSeconds(): number {
    return targetDurationSeconds(this.layer);
  }
  get version(): number {
    return this.layer.version;
  }
  has(msn: number, part?: number): boolean {
    return this.layer.has(msn, part);
  }
  reached(msn: number, part?: number): boolean {
    return this.layer.reached(msn, part);
  }
  waitFor(msn: number, part: number | undefined, done: () => void, reload = false): () => void {
    return this.layer.waitFor(msn, part, done, reload);
  }
  segment(sequence: number): Uint8Array | undefined {
    return this.layer.segment(sequence)?.data;
  }
  part(sequence: number, index: number): Uint8Array | undefined {
    return this.layer.part(sequence, index)?.data;
  }
  playlist(): Template {
    const v = this.layer.version;
    if (this.renderedVersion !== v || !this.rendered) {
      const t = mediaTemplate(this.layer);
      this.rendered = this.shared ? shareTemplate(t) : t;
      this.renderedVersion = v;
    }
    return this.rendered;
  }
  deltaPlaylist(): Template | null {
    const v = this.layer.version;
    if (this.deltaVersion !== v) {
      const skip = skippedSegments(this.layer);
      const t = skip > 0 ? mediaTemplate(this.layer, skip) : null;
      this.delta = t && this.shared ? shareTemplate(t) : t;
      this.deltaVersion = v;
    }
    return this.delta;
  }
}

/** A main-thread `StreamHub` as HLS serves it. */
export class HubView implements HlsStreamView {
  private readonly views = new Map<string, LayerView>();
  private rendered: Template | null = null;
  private renderedVersion = -1;

  constructor(readonly hub: StreamHub, private readonly shared: boolean) {
    for (const l of hub.layers) this.views.set(l.name, new LayerView(l, shared));
  }

  get ended(): boolean {
    return this.hub.ended;
  }
  get playable(): boolean {
    return this.hub.top.ready;
  }
  get version(): number {
    return this.hub.version;
  }
  get topTargetSeconds(): number {
    return targetDurationSeconds(this.hub.top);
  }
  layer(name: string): LayerView | undefined {
    return this.views.get(name);
  }
  /** Every layer's view, top first. */
  layers(): LayerView[] {
    return [...this.views.values()];
  }
  multivariant(): Template | null {
    if (this.hub.listed().length === 0) return null;
    const v = this.hub.version;
    if (this.renderedVersion !== v || !this.rendered) {
      const t = multivariantTemplate(this.hub);
      this.rendered = this.shared ? shareTemplate(t) : t;
      this.renderedVersion = v;
    }
    return this.rendered;
  }
}

/**
 * The main thread's streams: the media registry's hubs, each with one view (made on first use).
 * `shared`: render playlists into SharedArrayBuffers (a node with worker threads).
 */
export class HubSource implements HlsSource {
  private readonly views = new WeakMap<StreamHub, HubView>();

  constructor(private readonly media: MediaRegistry, private readonly shared = false) {}

  get(streamId: string): HubView | undefined {
    const hub = this.media.get(streamId);
    return hub ? this.view(hub) : undefined;
  }

  /** The view of `hub`. */
  view(hub: StreamHub): HubView {
    let v = this.views.get(hub);
    if (!v) this.views.set(hub, (v = new HubView(hub, this.shared)));
    return v;
  }
}
