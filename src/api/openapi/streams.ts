/**
 * OpenAPI descriptions of the Streams routes (src/api/streams/routes.ts), fed to the registry.
 * Request bodies are the schemas that validate them (src/api/streams/schemas.ts).
 */
import { documentRoute, valibot, type RouteDoc } from './registry.js';
import { CreateStream, UpdateStream, STREAM_STATUSES } from '../streams/schemas.js';
import { Deleted, StreamObject, listOf } from './schemas.js';

const stream = valibot(StreamObject);
const deprecationHeaders = {
  Deprecation: { description: 'Present when `quality=ultra_low` was given (RFC 9745).', schema: { type: 'string' } },
  Warning: { description: '299 warning naming `low` as the replacement of `ultra_low`.', schema: { type: 'string' } },
};
const pageQuery: NonNullable<RouteDoc['query']> = [
  { name: 'limit', description: 'Page size, 1 to 100.', schema: { type: 'integer', minimum: 1, maximum: 100, default: 20 } },
  { name: 'after', description: 'Return items older than this id (next page).', schema: { type: 'string' } },
  { name: 'before', description: 'Return items newer than this id (previous page); not with `after`.', schema: { type: 'string' } },
];

/** Registers the Streams descriptions. Idempotent. */
export function documentStreams(): void {
  documentRoute('GET', '/v2/streams', {
    summary: 'List streams',
    description: 'Newest first. `hasMore` and `nextCursor` continue in the direction of travel.',
    query: [...pageQuery, { name: 'status', description: 'Only streams in this state.', schema: { type: 'string', enum: [...STREAM_STATUSES] } }],
    responses: { 200: { description: 'A list envelope of streams.', schema: valibot(listOf(StreamObject)) } },
  });
  documentRoute('POST', '/v2/streams', {
    summary: 'Create a stream',
    body: { schema: valibot(CreateStream), description: '`metadata`: up to 16 keys. `quality=ultra_low` is a deprecated alias of `low`.' },
    responses: { 201: { description: 'The new stream (status `idle`). `streamKey` for secret keys only.', schema: stream, headers: deprecationHeaders } },
  });
  documentRoute('GET', '/v2/streams/:id', {
    summary: 'Retrieve a stream',
    params: { id: 'The stream id (`stm_…`).' },
    responses: { 200: { description: 'The stream. `streamKey` for secret keys only.', schema: stream } },
  });
  documentRoute('PATCH', '/v2/streams/:id', {
    summary: 'Update a stream',
    description: '`metadata` keys given as `null` are removed, others set; at most 16 keys after the merge.',
    params: { id: 'The stream id (`stm_…`).' },
    body: { schema: valibot(UpdateStream), required: false },
    responses: { 200: { description: 'The updated stream.', schema: stream, headers: deprecationHeaders } },
  });
  documentRoute('DELETE', '/v2/streams/:id', {
    summary: 'Delete a stream',
    description: 'A live stream is stopped first (`stream.ended`).',
    params: { id: 'The stream id (`stm_…`).' },
    responses: { 200: { description: 'Deleted.', schema: valibot(Deleted('stream')) } },
  });
  documentRoute('POST', '/v2/streams/:id/reset_stream_key', {
    summary: 'Reset the stream key',
    description: 'The old key stops working at once; the answer carries the new one.',
    params: { id: 'The stream id (`stm_…`).' },
    responses: { 200: { description: 'The stream with its new `streamKey`.', schema: stream } },
  });
}
