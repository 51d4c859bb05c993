/**
 * A worker thread's mirror of the streams it serves (docs/scaling.md): what HLS needs of each hub
 * and layer, kept up to date by the main thread's messages (src/delivery/threads/mirror-updates.ts builds them). Byte
 * payloads — segments, parts, init sections, rendered playlists — arrive as views of
 * SharedArrayBuffers: the main thread copied each once, and every thread reads that one copy.
 * A layer's held requests (blocking reloads, part waits) wait here and are answered when the
 * message that makes them true arrives (or after 3 target durations, or at the layer's end).
 *
 * Implements `HlsSource` (src/delivery/hls/source.ts), so src/delivery/hls/routes.ts serves a worker's requests
 * exactly as the main thread's.
 */
import type { Template } from './playlists.js';
import type { HlsLayerView, HlsSource, HlsStreamView } from './source.js';
import { Waiters } from '../../live/media/waiters.js';

/** What changed in one layer since the last message (the first message of a layer carries all of it). */
export interface LayerUpdate {
  name: string;
  /** Nominal bitrate (kbps). */
  kbps: number;
  container: 'ts' | 'fmp4';
  lowLatency: boolean;
  /** Longest a held request waits (ms): 3 target durations. */
  waitMs: number;
  /** Audio per part (LL-HLS) or segment (ms): what progressive listening's burst must outlast. */
  unitMs: number;
  version: number;
  failed: boolean;
  ready: boolean;
  ended: boolean;
  nextSequence: number;
  targetSeconds: number;
  initVersion: number;
  /** What names the init section's URI (`HlsLayerView.initId`). */
  initId: string;
  /** The init section, when it changed (or on the first message). */
  init?: Uint8Array | null;
  /** Segments new since the last message: `[sequence, bytes]`, oldest first. */
  segments: Array<[number, Uint8Array]>;
  /** Parts new since the last message: `[sequence, index, bytes]`, in order. */
  parts: Array<[number, number, Uint8Array]>;
  /** The oldest retained segment (older ones are let go). */
  firstSegment: number;
  /** The oldest segment whose parts are still listed (older parts are let go). */
  firstPartSegment: number;
  /** The media playlist of `version`. */
  playlist: Template;
  /** Its delta update (`_HLS_skip=YES`, rfc8216bis §6.2.5.1), or null when it would skip nothing. */
  delta: Template | null;
}

/** A stream's state as a worker mirrors it; `layers` are the layers that changed (all of them on the first message). */
export interface StreamUpdate {
  id: string;
  /** The hub's generation: a stream whose hub was replaced (a new publish after it ended) starts over. */
  gen: number;
  ended: boolean;
  playable: boolean;
  version: number;
  topTargetSeconds: number;
  codec: string;
  /** The multivariant playlist of `version`, or null while nothing is listed. */
  multivariant: Template | null;
  layers: LayerUpdate[];
}

/** One layer mirrored. */
export class MirrorLayer implements HlsLayerView {
  readonly name: string;
  kbps = 0;
  container: 'ts' | 'fmp4' = 'fmp4';
  lowLatency = false;
  failed = false;
  ready = false;
  ended = false;
  nextSequence = 0;
  targetSeconds = 1;
  version = -1;
  initVersion = 0;
  initId = '';
  init: Uint8Array | null = null;
  unitMs = 2000;
  private waitMs = 6000;
  private firstSegment = 0;
  private readonly segments: Uint8Array[] = [];
  private readonly parts = new Map<number, Uint8Array[]>();
  private template: Template = { plain: new Uint8Array(0), slots: new Uint32Array(0) };
  private delta: Template | null = null;
  private readonly waiters = new Waiters((msn, part, reload) => (reload ? this.reached(msn, part) : this.has(msn, part)));

  constructor(name: string) {
    this.name = name;
  }

  get openParts(): number {
    return this.parts.get(this.nextSequence)?.length ?? 0;
  }

  has(msn: number, part?: number): boolean {
    if (part === undefined) return msn < this.nextSequence;
    if (msn < this.nextSequence) return true;
    return msn === this.nextSequence && part < this.openParts;
  }

  reached(msn: number, part?: number): boolean {
    if (part === undefined || msn > this.nextSequence) return msn < this.nextSequence;
    if (msn === this.nextSequence) return part < this.openParts;
    if (msn < this.nextSequence - 1) return true;
    if (part < (this.parts.get(msn)?.length ?? 0)) return true;
    return this.openParts > 0; // part 0 of the segment in progress (rfc8216bis §6.2.5.2)
  }

  waitFor(msn: number, part: number | undefined, done: () => void, reload = false): () => void {
    if (this.ended || (reload ? this.reached(msn, part) : this.has(msn, part))) {
      done();
      return () => {};
    }
    return this.waiters.add(msn, part, this.waitMs, done, reload);
  }

  /** Held requests now (tests, diagnostics). */
  get waiting(): number {
    return this.waiters.size;
  }

  segment(sequence: number): Uint8Array | undefined {
    return sequence >= this.firstSegment ? this.segments[sequence - this.firstSegment] : undefined;
  }

  part(sequence: number, index: number): Uint8Array | undefined {
    return this.parts.get(sequence)?.[index];
  }

  playlist(): Template {
    return this.template;
  }

  deltaPlaylist(): Template | null {
    return this.delta;
  }

  /** The oldest retained segment's sequence number. */
  get oldestSegment(): number {
    return this.firstSegment;
  }

  /** Takes in a main-thread update, then answers the held requests it satisfies. */
  apply(u: LayerUpdate): void {
    this.kbps = u.kbps;
    this.container = u.container;
    this.lowLatency = u.lowLatency;
    this.waitMs = u.waitMs;
    this.unitMs = u.unitMs;
    this.failed = u.failed;
    this.ready = u.ready;
    this.targetSeconds = u.targetSeconds;
    this.initVersion = u.initVersion;
    this.initId = u.initId;
    if (u.init !== undefined) this.init = u.init;
    for (const [seq, index, data] of u.parts) {
      let list = this.parts.get(seq);
      if (!list) this.parts.set(seq, (list = []));
      list[index] = data;
    }
    for (const [seq, data] of u.segments) {
      if (this.segments.length === 0) this.firstSegment = seq;
      this.segments[seq - this.firstSegment] = data;
    }
    // Let go of what the main thread let go of.
    while (this.segments.length > 0 && this.firstSegment < u.firstSegment) {
      this.segments.shift();
      this.firstSegment++;
    }
    if (this.segments.length === 0) this.firstSegment = u.firstSegment;
    for (const seq of this.parts.keys()) if (seq < u.firstPartSegment) this.parts.delete(seq);
    this.nextSequence = u.nextSequence;
    this.template = u.playlist;
    this.delta = u.delta;
    this.version = u.version;
    const ending = u.ended && !this.ended;
    this.ended = u.ended;
    this.waiters.wake(ending);
  }
}

/** One stream mirrored. */
export class MirrorStream implements HlsStreamView {
  ended = false;
  playable = false;
  version = -1;
  topTargetSeconds = 1;
  codec = '';
  private template: Template | null = null;
  readonly layers = new Map<string, MirrorLayer>();

  constructor(readonly id: string, readonly gen: number) {}

  layer(name: string): MirrorLayer | undefined {
    return this.layers.get(name);
  }

  multivariant(): Template | null {
    return this.template;
  }

  apply(u: StreamUpdate): void {
    for (const lu of u.layers) {
      let l = this.layers.get(lu.name);
      if (!l) this.layers.set(lu.name, (l = new MirrorLayer(lu.name)));
      l.apply(lu);
    }
    this.ended = u.ended;
    this.playable = u.playable;
    this.version = u.version;
    this.topTargetSeconds = u.topTargetSeconds;
    this.codec = u.codec;
    this.template = u.multivariant;
  }

  /** The stream left the node (its hub was dropped): every held request is answered with what there is. */
  drop(): void {
    for (const l of this.layers.values()) l.apply({ ...lastUpdate(l), ended: true });
  }
}

/** A layer's state as an update that changes nothing (used to end it). */
function lastUpdate(l: MirrorLayer): LayerUpdate {
  const first = l.oldestSegment;
  return {
    name: l.name,
    kbps: l.kbps,
    container: l.container,
    lowLatency: l.lowLatency,
    waitMs: 0,
    unitMs: l.unitMs,
    version: l.version,
    failed: l.failed,
    ready: l.ready,
    ended: l.ended,
    nextSequence: l.nextSequence,
    targetSeconds: l.targetSeconds,
    initVersion: l.initVersion,
    initId: l.initId,
    segments: [],
    parts: [],
    firstSegment: first,
    firstPartSegment: first,
    playlist: l.playlist(),
    delta: l.deltaPlaylist(),
  };
}

/** Every stream a worker thread serves, by id. */
export class MirrorSource implements HlsSource {
  private readonly streams = new Map<string, MirrorStream>();

  get(streamId: string): MirrorStream | undefined {
    return this.streams.get(streamId);
  }

  /** Takes in a stream update (a new generation replaces the stream's mirror). */
  apply(u: StreamUpdate): void {
    let s = this.streams.get(u.id);
    if (!s || s.gen !== u.gen) {
      s?.drop();
      this.streams.set(u.id, (s = new MirrorStream(u.id, u.gen)));
    }
    s.apply(u);
  }

  /** The main thread let go of a stream's hub. */
  drop(id: string, gen: number): void {
    const s = this.streams.get(id);
    if (!s || s.gen !== gen) return;
    this.streams.delete(id);
    s.drop();
  }

  /** Every stream mirrored now. */
  all(): IterableIterator<MirrorStream> {
    return this.streams.values();
  }
}
