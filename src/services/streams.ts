/**
 * The Streams resource (spec "Streams", PRODUCT.md §2, §9): create, read, list, update, delete,
 * reset the stream key. Knows no HTTP and no SQL text.
 */
import { ApiError, notFound, paramInvalid } from '../errors/errors.js';
import { newId, randomBase62 } from '../ids.js';
import type { StreamRow, StreamsRepo, StreamStatus } from '../db/streams-repo.js';
import type { Page, PageQuery } from '../db/paginate.js';
import { UnknownCursorError } from '../db/paginate.js';
import type { PublicUrls } from '../config/config.js';
import { decryptSecret, encryptSecret, hashToken } from '../auth/secrets.js';
import { REGIONS, type Region } from './accounts.js';
import type { AccountsRepo } from '../db/accounts-repo.js';
import { toStreamObject, type StreamObject } from './stream-object.js';
import type { CreateStreamInput, UpdateStreamInput } from '../api/streams/schemas.js';
import { LANGUAGE_TITLES, METADATA_MAX_KEYS } from '../api/streams/schemas.js';

/** What the live side offers the resource: counts and the power to stop a publisher. */
export interface LiveControl {
  listenerCount(streamId: string): number;
  /** Ends a live stream now (publisher disconnected, `stream.ended`), before deletion. */
  endNow(streamId: string): void;
  /** Disconnects the current publisher (after a key reset); the reconnect window applies. */
  disconnectPublisher(streamId: string): void;
}

/** Result of a write whose input used a deprecated value. */
export interface WithDeprecation<T> {
  value: T;
  deprecated: string[];
}

export interface StreamsDeps {
  streams: StreamsRepo;
  accounts: AccountsRepo;
  nodeSecret: Buffer;
  urls: () => PublicUrls;
  live: LiveControl;
  /** Refuses a `recording.podcastId` that is not a live podcast of the account. @throws ApiError 400 */
  checkRecordingPodcast?: (accountId: string, podcastId: string) => void;
  now?: () => number;
}

const DEFAULT_RECONNECT_WINDOW = 30;

export class StreamsService {
  private readonly now: () => number;
  constructor(private readonly d: StreamsDeps) {
    this.now = d.now ?? Date.now;
  }

  /** Creates an `idle` stream with a new stream key. @throws ApiError 400 */
  create(accountId: string, input: CreateStreamInput): WithDeprecation<StreamObject> {
    const deprecated: string[] = [];
    if (input.recording) this.d.checkRecordingPodcast?.(accountId, input.recording.podcastId);
    const quality = normalizeQuality(input.quality, deprecated) ?? 'medium';
    const account = this.d.accounts.get(accountId);
    const region = (input.region ?? account?.default_region ?? 'eu-west-1') as Region;
    const key = makeStreamKey(region);
    const titles: Record<string, string> = {};
    for (const t of LANGUAGE_TITLES) if (input[t] !== undefined) titles[t] = input[t]!;
    const row: StreamRow = {
      id: newId('stm'),
      account_id: accountId,
      title: input.title,
      titles: JSON.stringify(titles),
      status: 'idle',
      quality,
      codec: input.codec ?? 'aac',
      region,
      stream_key_hash: hashToken(key),
      stream_key_enc: encryptSecret(this.d.nodeSecret, key),
      metadata: JSON.stringify(input.metadata ?? {}),
      reconnect_window: input.reconnectWindow ?? DEFAULT_RECONNECT_WINDOW,
      recording: input.recording ? JSON.stringify(input.recording) : null,
      playback: input.playback ?? 'public',
      created_at: this.now(),
      started_at: null,
      ended_at: null,
    };
    this.d.streams.insert(row);
    return { value: this.render(row, true), deprecated };
  }

  /** @throws ApiError 404 */
  get(accountId: string, id: string, withKey: boolean): StreamObject {
    return this.render(this.row(accountId, id), withKey);
  }

  /** A page of the account's streams, newest first. @throws ApiError 400 for an unknown cursor */
  list(accountId: string, status: StreamStatus | undefined, q: PageQuery, withKey: boolean): { data: StreamObject[]; hasMore: boolean } {
    let page: Page<StreamRow>;
    try {
      page = this.d.streams.list(accountId, status, q);
    } catch (e) {
      if (e instanceof UnknownCursorError) throw paramInvalid(e.param, e.message);
      throw e;
    }
    return { data: page.rows.map((r) => this.render(r, withKey)), hasMore: page.hasMore };
  }

  /** Applies a PATCH; metadata keys given as null are removed. @throws ApiError 400/404 */
  update(accountId: string, id: string, input: UpdateStreamInput, withKey: boolean): WithDeprecation<StreamObject> {
    const deprecated: string[] = [];
    const row = { ...this.row(accountId, id) };
    if (input.recording) this.d.checkRecordingPodcast?.(accountId, input.recording.podcastId);
    if (input.title !== undefined) row.title = input.title;
    const titles = JSON.parse(row.titles) as Record<string, string>;
    for (const t of LANGUAGE_TITLES) {
      const value = input[t];
      if (value === null) delete titles[t];
      else if (value !== undefined) titles[t] = value;
    }
    row.titles = JSON.stringify(titles);
    const quality = normalizeQuality(input.quality, deprecated);
    if (quality) row.quality = quality;
    if (input.metadata !== undefined) {
      const metadata = JSON.parse(row.metadata) as Record<string, string>;
      for (const [k, value] of Object.entries(input.metadata)) {
        if (value === null) delete metadata[k];
        else metadata[k] = value;
      }
      if (Object.keys(metadata).length > METADATA_MAX_KEYS) {
        throw paramInvalid('metadata', `metadata may hold at most ${METADATA_MAX_KEYS} keys after the update.`);
      }
      row.metadata = JSON.stringify(metadata);
    }
    if (input.reconnectWindow !== undefined) row.reconnect_window = input.reconnectWindow;
    if (input.recording !== undefined) row.recording = input.recording === null ? null : JSON.stringify(input.recording);
    if (input.playback !== undefined) row.playback = input.playback;
    this.d.streams.update(row);
    return { value: this.render(row, withKey), deprecated };
  }

  /** Deletes a stream; a live one is ended first. @throws ApiError 404 */
  delete(accountId: string, id: string): { id: string; object: 'stream'; deleted: true } {
    const row = this.row(accountId, id);
    if (row.status === 'live') this.d.live.endNow(id);
    this.d.streams.delete(id);
    return { id, object: 'stream', deleted: true };
  }

  /** Replaces the stream key; the current publisher is disconnected. @throws ApiError 404, 409 when ended */
  resetStreamKey(accountId: string, id: string): StreamObject {
    const row = this.row(accountId, id);
    if (row.status === 'ended') throw new ApiError(409, 'stream_ended', 'The stream has ended; its key can no longer be used.');
    const key = makeStreamKey(row.region as Region);
    const hash = hashToken(key);
    const enc = encryptSecret(this.d.nodeSecret, key);
    this.d.streams.setStreamKey(id, hash, enc);
    this.d.live.disconnectPublisher(id);
    return this.render({ ...row, stream_key_hash: hash, stream_key_enc: enc }, true);
  }

  private row(accountId: string, id: string): StreamRow {
    const row = this.d.streams.get(id, accountId);
    if (!row) throw notFound('stream', id);
    return row;
  }

  private render(row: StreamRow, withKey: boolean): StreamObject {
    const key = withKey ? decryptSecret(this.d.nodeSecret, row.stream_key_enc) : undefined;
    return toStreamObject(row, this.d.urls(), this.d.live.listenerCount(row.id), key);
  }
}

/** `sk_<region code>_<40 base62>` (PRODUCT.md §2). */
export function makeStreamKey(region: Region): string {
  return `sk_${REGIONS[region]}_${randomBase62(40)}`;
}

function normalizeQuality(q: string | undefined, deprecated: string[]): string | undefined {
  if (q === 'ultra_low') {
    deprecated.push('quality=ultra_low');
    return 'low';
  }
  return q;
}
