/**
 * The listener endpoints' logic (docs/behaviour.md §4, §9 "Lists"): active listeners of a stream as a
 * page, `/stats`, and listener tokens. Knows no HTTP and no SQL text. Streams of another account
 * are 404, like every resource.
 */
import { ApiError, notFound } from '../../base/errors/errors.js';
import type { StreamsRepo } from '../../base/db/streams-repo.js';
import type { PageQuery } from '../../base/db/paginate.js';
import type { ListenerTokenMinter, ListenerTokens } from '../../base/auth/listener-tokens.js';
import type { ListenerObject, StreamStats } from '../../base/listeners.js';

/** One active listener session as the control plane sees it: its id (`lst_…`) and country. */
export interface ListenerSession {
  readonly id: string;
  /** ISO 3166-1 alpha-2, or null when unknown. */
  readonly country: string | null;
  /** How long the session lives without a request (ms); 0 for an open connection (`/listen`, Icecast, WebRTC). */
  readonly timeoutMs: number;
  /** When the session was last seen (ms since the epoch). */
  readonly lastSeenAt: number;
}

/**
 * What the control plane reads of the listeners room (docs/behaviour.md §4): the delivery plane's
 * listener registry (src/delivery/listeners/registry.ts) is one, handed over by the composition root.
 */
export interface ListenerDirectory {
  /** Listeners of a stream now (every protocol). */
  listenerCount(streamId: string): number;
  /** Active sessions of a stream, oldest first. */
  active(streamId: string): readonly ListenerSession[];
  /** The API object of a session `active` returned. */
  object(s: ListenerSession): ListenerObject;
  /** `/stats` of a stream from the registry alone (pending joins and leaves written first). */
  stats(streamId: string): StreamStats;
  /** Writes pending joins and leaves now. */
  flush(): void;
  /** An active session of a stream by id, or undefined. */
  get(streamId: string, id: string): ListenerSession | undefined;
}

/** The listeners room as the control plane is given it: the directory and the listener tokens. */
export interface ListenersRoom {
  registry: ListenerDirectory;
  tokens: ListenerTokens;
}

/** A page of listeners, newest first (docs/behaviour.md §9); the API wraps it in the list envelope. */
export interface ListenerPage {
  data: ListenerObject[];
  /** Whether more listeners lie further in the direction of travel. */
  hasMore: boolean;
}

/** The figures of a stream's current (or last) broadcast that `/stats` shows (docs/streams.md); null before its first. */
export type BroadcastFigures = (streamId: string) => { broadcastId: string; peakListeners: number; totalListeners: number; listenerSeconds: number } | null;

export class ListenersService {
  /**
   * `broadcasts` scopes `/stats` to the stream's current broadcast while live, its last one while
   * idle (docs/streams.md); without it `/stats` shows the registry's figures alone.
   */
  constructor(
    private readonly registry: ListenerDirectory,
    private readonly streams: StreamsRepo,
    private readonly tokens: ListenerTokens,
    private readonly broadcasts: BroadcastFigures | null = null,
    /** Bytes of the stream's catch-up segments on disk (docs/behaviour.md "Catch-up radio"); null: `catchUpBytes` is 0. */
    private readonly catchUpBytes: ((streamId: string) => number) | null = null,
  ) {}

  /**
   * Active listeners of `streamId`, newest first; `after`/`before` are listener ids of the active
   * list. @throws ApiError 404 unknown stream, 400 unknown cursor (`param` names it)
   */
  list(accountId: string, streamId: string, q: PageQuery): ListenerPage {
    this.stream(accountId, streamId);
    const all = [...this.registry.active(streamId)].reverse(); // newest first
    let rows: typeof all;
    let hasMore: boolean;
    if (q.after !== undefined || q.before !== undefined) {
      const param = q.after !== undefined ? 'after' : 'before';
      const id = (q.after ?? q.before)!;
      const i = all.findIndex((s) => s.id === id);
      if (i < 0) throw new ApiError('parameter_invalid', `No such listener for cursor '${param}': '${id}' (it may have left).`, { param });
      if (param === 'after') {
        rows = all.slice(i + 1, i + 1 + q.limit);
        hasMore = all.length > i + 1 + q.limit;
      } else {
        const from = Math.max(0, i - q.limit);
        rows = all.slice(from, i);
        hasMore = from > 0;
      }
    } else {
      rows = all.slice(0, q.limit);
      hasMore = all.length > q.limit;
    }
    return { data: rows.map((s) => this.registry.object(s)), hasMore };
  }

  /**
   * `/stats` of a stream: the live count and the countries of the current listeners; the peak, the
   * total and the average listen duration of the current broadcast while live, of the last one
   * while idle (`broadcastId`; null before the first broadcast). @throws ApiError 404
   */
  stats(accountId: string, streamId: string): StreamStats & { broadcastId?: string | null; catchUpBytes: number } {
    this.stream(accountId, streamId);
    const s = { ...this.registry.stats(streamId), catchUpBytes: this.catchUpBytes?.(streamId) ?? 0 }; // writes pending joins and leaves first: the broadcast has heard them
    if (!this.broadcasts) return s;
    const b = this.broadcasts(streamId);
    if (!b) return { ...s, broadcastId: null };
    return {
      ...s,
      broadcastId: b.broadcastId,
      peakListenerCount: b.peakListeners,
      totalListeners: b.totalListeners,
      averageListenDurationSeconds: b.totalListeners === 0 ? 0 : Math.round((b.listenerSeconds / b.totalListeners) * 10) / 10,
    };
  }

  /**
   * A listener token for the stream, valid 24 h, carrying who minted it (a publishable credential's
   * opens a token stream only where the stream allows it, docs/behaviour.md §13). @throws ApiError 404
   */
  async createToken(accountId: string, streamId: string, mintedBy: ListenerTokenMinter): Promise<{ object: 'listener_token'; token: string; streamId: string; expiresAt: string }> {
    this.stream(accountId, streamId);
    const { token, claims } = await this.tokens.sign(streamId, mintedBy);
    return { object: 'listener_token', token, streamId, expiresAt: new Date(claims.expiresAt).toISOString() };
  }

  private stream(accountId: string, streamId: string) {
    const row = this.streams.get(streamId, accountId);
    if (!row) throw notFound('stream', streamId);
    return row;
  }
}
