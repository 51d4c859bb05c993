/**
 * The listener endpoints' logic (PRODUCT.md §4, §9 "Lists"): active listeners of a stream as a
 * page, `/stats`, and listener tokens. Knows no HTTP and no SQL text. Streams of another account
 * are 404, like every resource.
 */
import { ApiError, notFound } from '../errors/errors.js';
import type { StreamsRepo } from '../db/streams-repo.js';
import type { PageQuery } from '../db/paginate.js';
import type { ListenerTokens } from '../auth/listener-tokens.js';
import type { ListenerObject, ListenerRegistry, StreamStats } from './registry.js';

/** A page of listeners, newest first (PRODUCT.md §9); the API wraps it in the list envelope. */
export interface ListenerPage {
  data: ListenerObject[];
  /** Whether more listeners lie further in the direction of travel. */
  hasMore: boolean;
}

export class ListenersService {
  constructor(private readonly registry: ListenerRegistry, private readonly streams: StreamsRepo, private readonly tokens: ListenerTokens) {}

  /**
   * Active listeners of `streamId`, newest first; `after`/`before` are listener ids of the active
   * list. @throws ApiError 404 unknown stream, 400 unknown cursor (`param` names it)
   */
  list(accountId: string, streamId: string, q: PageQuery): ListenerPage {
    this.stream(accountId, streamId);
    const all = this.registry.active(streamId).reverse(); // newest first
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

  /** `/stats` of a stream. @throws ApiError 404 */
  stats(accountId: string, streamId: string): StreamStats {
    this.stream(accountId, streamId);
    return this.registry.stats(streamId);
  }

  /** A listener token for the stream, valid 24 h. @throws ApiError 404 */
  async createToken(accountId: string, streamId: string): Promise<{ object: 'listener_token'; token: string; streamId: string; expiresAt: string }> {
    this.stream(accountId, streamId);
    const { token, claims } = await this.tokens.sign(streamId);
    return { object: 'listener_token', token, streamId, expiresAt: new Date(claims.expiresAt).toISOString() };
  }

  private stream(accountId: string, streamId: string) {
    const row = this.streams.get(streamId, accountId);
    if (!row) throw notFound('stream', streamId);
    return row;
  }
}
