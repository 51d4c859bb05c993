/**
 * The list envelope of every list route (spec "List envelope", docs/behaviour.md §9 "Lists") and the page
 * parameters its OpenAPI description lists. Pages come from the services newest first; the cursor
 * to continue with is the last item's id when going `after` (the default), the first item's when
 * going `before`, and null when there is nothing more in that direction.
 */
import type { ApiReply } from '../../base/http/server.js';
import type { PageQuery } from '../../base/db/paginate.js';
import type { RouteDoc } from './openapi/registry.js';

/** A page as the services return it. */
export interface ListPage<T extends { id: string }> {
  data: T[];
  /** Whether more items lie further in the direction of travel. */
  hasMore: boolean;
}

/** 200 `{ object: 'list', url, data, hasMore, nextCursor }` for `page`, read with query `q`, of the list at `url` (`/v2/streams`). */
export function listReply<T extends { id: string }>(url: string, page: ListPage<T>, q: PageQuery): ApiReply {
  const cursorItem = q.before !== undefined ? page.data[0] : page.data[page.data.length - 1];
  return { status: 200, body: { object: 'list', url, data: page.data, hasMore: page.hasMore, nextCursor: page.hasMore && cursorItem ? cursorItem.id : null } };
}

/** The query parameters of a list (`limit`, `after`, `before` and their aliases; src/control/api/validation.ts `parsePageQuery`), for its RouteDoc; `what` names the items. */
export function pageQueryDoc(what = 'items'): NonNullable<RouteDoc['query']> {
  return [
    { name: 'limit', description: 'Page size, 1 to 100.', schema: { type: 'integer', minimum: 1, maximum: 100, default: 20 } },
    { name: 'after', description: `Return ${what} older than this id (next page).`, schema: { type: 'string' } },
    { name: 'before', description: `Return ${what} newer than this id (previous page); not with \`after\`.`, schema: { type: 'string' } },
    { name: 'starting_after', description: 'Another name of `after` (Stripe’s); not with `after`.', schema: { type: 'string' } },
    { name: 'ending_before', description: 'Another name of `before` (Stripe’s); not with `before`.', schema: { type: 'string' } },
  ];
}
