/**
 * LL-HLS blocking playlist reloads held in native code (docs/http.md "Blocking reloads held in
 * native code"; rfc8216bis §6.2.5.2).
 *
 * An LL-HLS listener holds a blocking reload about twice a second, and every listener of a layer
 * waits for the same part and gets the same bytes. For each public LL-HLS layer that ./routes.ts
 * serves, this keeps the native HTTP front told where the layer is (the segment in progress, its
 * parts, the parts of the segment before it: what `Layer.reached` reads), how long a reload waits
 * (3 target durations) and the four answers `mediaPlaylist` would give a public reload — the
 * playlist and its delta update, each as answered when what was asked for is listed
 * (`public, max-age=<target>`) and when the wait ran out (`no-store`) — once per layer version.
 * The front answers a plain `GET <layer>/index.m3u8?sid=…&_HLS_msn=M&_HLS_part=P[&_HLS_skip=YES]`
 * at once when the layer lists the part, or holds it and writes the answer to every waiting
 * connection when it does (or when the wait runs out). Everything else reaches ./routes.ts as before.
 *
 * What JavaScript still decides comes to it in batches, every `DRAIN_MS`: each answered or held
 * reload's session (stream, layer, `sid`, client address, User-Agent) is counted as ./routes.ts
 * counts it (`HlsAccess.media`), and the held-request cells of new client addresses are handed to
 * the front (it counts its holds into the node-wide counter, src/delivery/listeners/held.ts; an
 * address whose cells it does not know yet goes to the routes meanwhile).
 *
 * A layer is withdrawn (its later reloads reach the routes) when it fails, its stream stops being
 * public or is deleted, or its hub is let go; its held reloads are then answered as timed out.
 * When it ends, its held reloads get the final playlist, as the routes answer them.
 */
import type { RawRequestInfo } from '../../base/http/server.js';
import type { HeldReloadSession, HeldReloadState } from '../../native/http-front.js';
import { publicReloadHeads, type HlsAccess } from './routes.js';
import type { HlsLayerView, HlsSource } from './source.js';

/** The front's held reloads (src/native/http-front.ts). */
export interface ReloadFront {
  put(path: string, at: HeldReloadState, heads: Uint8Array[], bodies: Uint8Array[]): boolean;
  delete(path: string, final?: { head: Uint8Array; body: Uint8Array }): boolean;
  putCells(address: string, a: number, b: number): boolean;
  drain(): { sessions: HeldReloadSession[]; wanted: string[] };
}

export interface NativeReloadsDeps {
  front: ReloadFront;
  source: HlsSource;
  /** Counts sessions as the routes do (the listeners' `HlsAccess`); none: untracked. */
  access: Pick<HlsAccess, 'media'> | undefined;
  /** The held-request counter's two cells of an address (`HeldRequests.nativeCaps().cellsOf`). */
  cellsOf: (address: string) => [number, number];
  /** The request id prefix of the front's answers (src/base/ids.ts `nativeRequestIdPrefix`). */
  requestIdPrefix: string;
}

/** How often sessions and wanted addresses are taken from the front (ms). */
export const DRAIN_MS = 250;

interface Published {
  version: number;
  targetSeconds: number;
  heads: ReturnType<typeof publicReloadHeads>;
}

/** Keeps the front's held reloads equal to the public LL-HLS layers the routes serve (see the top of this file). */
export class NativeReloads {
  private readonly published = new Map<string, Published>();
  private timer: NodeJS.Timeout | null = null;
  private closed = false;

  constructor(private readonly d: NativeReloadsDeps) {
    this.timer = setInterval(() => this.drain(), DRAIN_MS);
    this.timer.unref();
  }

  /**
   * Publishes the layer at `path` (`/hls/<stream>/<layer>/index.m3u8`) as `view` is now, when its
   * stream is public and playable (`servable`), or withdraws it. Unchanged versions cost a map lookup.
   */
  sync(path: string, view: HlsLayerView | undefined, servable: boolean): void {
    if (this.closed) return;
    if (!view || !servable || view.failed || !view.lowLatency || !view.ready || view.container !== 'fmp4') return this.withdraw(path);
    if (view.ended) return this.withdraw(path, view);
    const had = this.published.get(path);
    if (had && had.version === view.version) return;
    const targetSeconds = view.targetSeconds;
    const heads = had && had.targetSeconds === targetSeconds ? had.heads : publicReloadHeads(this.d.requestIdPrefix, targetSeconds);
    const full = view.playlist().plain;
    const delta = view.deltaPlaylist()?.plain ?? full;
    const at: HeldReloadState = { nextSequence: view.nextSequence, openParts: view.openParts, previousParts: partsOf(view, view.nextSequence - 1), timeoutMs: 3 * targetSeconds * 1000 };
    if (this.d.front.put(path, at, [heads.reached, heads.reached, heads.unreached, heads.unreached], [full, delta, full, delta])) {
      this.published.set(path, { version: view.version, targetSeconds, heads });
    } else {
      this.withdraw(path);
    }
  }

  /** Withdraws `path`; with `ended` (the layer ended), its held reloads get the final playlist. */
  withdraw(path: string, ended?: HlsLayerView): void {
    const had = this.published.get(path);
    if (!had) return;
    this.published.delete(path);
    this.d.front.delete(path, ended ? { head: publicReloadHeads(this.d.requestIdPrefix, ended.targetSeconds).ended, body: ended.playlist().plain } : undefined);
  }

  /** Layers published now (tests, diagnostics). */
  get size(): number {
    return this.published.size;
  }

  /** Withdraws every layer, counts what is queued, and stops (server shutdown). */
  close(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.closed = true;
    for (const path of [...this.published.keys()]) this.withdraw(path);
    this.drain();
  }

  /** Counts the queued sessions as the routes would, and hands the front the cells it wants. */
  drain(): void {
    const { sessions, wanted } = this.d.front.drain();
    for (const address of wanted) {
      const [a, b] = this.d.cellsOf(address);
      this.d.front.putCells(address, a, b);
    }
    if (!this.d.access) return;
    for (const s of sessions) this.count(s);
  }

  /** One answered or held reload's session: `HlsAccess.media` with the request's sid, address and User-Agent. */
  private count(s: HeldReloadSession): void {
    const [, , id, name] = s.path.split('/');
    const view = id && name ? this.d.source.get(id)?.layer(name) : undefined;
    if (!view) return;
    const info: RawRequestInfo = { remoteAddress: () => s.address, header: (n) => (n === 'user-agent' ? s.userAgent : '') };
    try {
      this.d.access!.media(id!, `sid=${s.sid}`, info, 3 * view.targetSeconds * 1000);
    } catch {
      // A failing policy read (database): this reload goes uncounted, as a request the routes failed.
    }
  }
}

/** Parts of segment `seq` that `view` keeps (0 when none). */
function partsOf(view: HlsLayerView, seq: number): number {
  if (seq < 0) return 0;
  let n = 0;
  while (view.part(seq, n)) n++;
  return n;
}
