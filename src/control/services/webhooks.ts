/**
 * The Webhooks resource (spec "Webhooks", docs/behaviour.md §6, §9): create, read, list, update, delete,
 * roll the signing secret, send a `webhook.test` event. The signing secret (`whsec_…`) is shown only
 * by create and roll; at rest it is AES-256-GCM-encrypted under the node secret (delivery needs it).
 * Knows no HTTP and no SQL text.
 */
import { ApiError, notFound, paramInvalid } from '../../base/errors/errors.js';
import { newId, randomBase62 } from '../../base/ids.js';
import { decryptSecret, encryptSecret } from '../../base/auth/secrets.js';
import { UnknownCursorError, type PageQuery } from '../../base/db/paginate.js';
import type { WebhookRow, WebhooksRepo, WebhookStatus } from '../../base/db/webhooks-repo.js';
import type { Database } from '../../base/db/database.js';
import type { ApiEvent, Outbox } from '../../base/outbox.js';
import { UnitOfWork } from '../../base/db/unit-of-work.js';
import { checkResolvedHost, checkUrlForm, DestinationError } from '../webhooks/destination.js';
import { EVENT_TYPES } from '../../base/outbox.js';

/** A validated `POST /webhooks` body (api/webhooks/schemas.ts validates it): `events` are known types or `*`. */
export interface CreateWebhookInput {
  url: string;
  events: string[];
  description?: string;
}

/** A validated `PATCH /webhooks/{id}` body; `description: null` clears it. */
export interface UpdateWebhookInput {
  url?: string;
  events?: string[];
  description?: string | null;
  status?: 'active' | 'disabled';
}

/** Normalizes a subscription: `"*"` anywhere means all; duplicates dropped; spec order. */
export function normalizeEvents(list: string[]): string[] {
  if (list.includes('*')) return ['*'];
  return EVENT_TYPES.filter((t) => list.includes(t));
}

/** The webhook object (spec "Webhook"). `signingSecret` only in create and roll answers. */
export interface WebhookObject {
  id: string;
  object: 'webhook';
  url: string;
  events: string[];
  description: string | null;
  status: WebhookStatus;
  createdAt: string;
  signingSecret?: string;
}

/** Live webhooks one account may have (docs/webhooks.md). */
export const MAX_WEBHOOKS_PER_ACCOUNT = 500;

export interface WebhooksDeps {
  db: Database;
  repo: WebhooksRepo;
  outbox: Outbox;
  nodeSecret: Buffer;
  allowPrivate: boolean;
  /** Tells the dispatcher that `webhookId` has a new due delivery. */
  wake: (webhookId: string) => void;
  now?: () => number;
}

/** `whsec_` + 32 base62 characters (~190 bits). */
export function newSigningSecret(): string {
  return `whsec_${randomBase62(32)}`;
}

export class WebhooksService {
  private readonly now: () => number;
  /** Writes that record events: one transaction, events after the commit (src/base/db/unit-of-work.ts). */
  private readonly uow: UnitOfWork;

  constructor(private readonly d: WebhooksDeps) {
    this.now = d.now ?? Date.now;
    this.uow = new UnitOfWork(d.db, d.outbox);
  }

  /**
   * Creates an `active` webhook that receives events recorded from now on.
   * @throws ApiError 400 (`param_required`, `parameter_invalid`, `url_not_allowed`, `webhook_limit_reached`)
   */
  async create(accountId: string, input: CreateWebhookInput): Promise<WebhookObject> {
    const url = await this.checkUrl(input.url);
    if (this.d.repo.count(accountId) >= MAX_WEBHOOKS_PER_ACCOUNT) {
      throw new ApiError('webhook_limit_reached', `An account may have at most ${MAX_WEBHOOKS_PER_ACCOUNT} webhooks; delete one first.`);
    }
    const secret = newSigningSecret();
    const row: WebhookRow = {
      id: newId('wh'),
      account_id: accountId,
      url,
      events: JSON.stringify(normalizeEvents(input.events)),
      description: input.description ?? null,
      status: 'active',
      secret_enc: encryptSecret(this.d.nodeSecret, secret),
      from_event_seq: 0,
      created_at: this.now(),
      deleted_at: null,
    };
    this.d.db.transaction(() => {
      row.from_event_seq = this.d.repo.maxEventSeq();
      this.d.repo.insert(row);
    }).immediate();
    return { ...render(row), signingSecret: secret };
  }

  /** @throws ApiError 404 */
  get(accountId: string, id: string): WebhookObject {
    return render(this.row(accountId, id));
  }

  /** A page of the account's webhooks, newest first. @throws ApiError 400 for an unknown cursor */
  list(accountId: string, status: WebhookStatus | undefined, q: PageQuery): { data: WebhookObject[]; hasMore: boolean } {
    try {
      const page = this.d.repo.list(accountId, status, q);
      return { data: page.rows.map(render), hasMore: page.hasMore };
    } catch (e) {
      if (e instanceof UnknownCursorError) throw paramInvalid(e.param, e.message);
      throw e;
    }
  }

  /**
   * Updates url, events, description (null clears), status. A disabled webhook gets no new events
   * and no attempts; re-enabled, its pending deliveries resume. @throws ApiError 400/404
   */
  async update(accountId: string, id: string, input: UpdateWebhookInput): Promise<WebhookObject> {
    const url = input.url !== undefined ? await this.checkUrl(input.url) : undefined;
    const row = { ...this.row(accountId, id) };
    if (url !== undefined) row.url = url;
    if (input.events !== undefined) row.events = JSON.stringify(normalizeEvents(input.events));
    if (input.description !== undefined) row.description = input.description;
    if (input.status !== undefined) row.status = input.status;
    this.d.repo.update(row);
    if (row.status === 'active') this.d.wake(id);
    return render(row);
  }

  /** Deletes the webhook; its pending deliveries end `undelivered`. @throws ApiError 404 */
  delete(accountId: string, id: string): { id: string; object: 'webhook'; deleted: true } {
    this.row(accountId, id);
    this.d.repo.softDelete(id, this.now());
    return { id, object: 'webhook', deleted: true };
  }

  /**
   * Replaces the signing secret at once: every attempt from now on (retries included) is signed with
   * the new one. Returns the webhook with the new `signingSecret`. @throws ApiError 404
   */
  rollSecret(accountId: string, id: string): WebhookObject {
    const row = this.row(accountId, id);
    const secret = newSigningSecret();
    const enc = encryptSecret(this.d.nodeSecret, secret);
    this.d.repo.setSecret(id, enc);
    return { ...render({ ...row, secret_enc: enc }), signingSecret: secret };
  }

  /**
   * Records a `webhook.test` event (`livemode: false`, `data.object` = this webhook) and queues its
   * delivery to this endpoint only, whatever the endpoint subscribes to, in one transaction.
   * @throws ApiError 404; 409 `webhook_disabled` for a disabled webhook
   */
  test(accountId: string, id: string): ApiEvent {
    const row = this.row(accountId, id);
    if (row.status !== 'active') throw new ApiError('webhook_disabled', 'The webhook is disabled; enable it (PATCH status=active) to send a test event.');
    const event = this.uow.run(
      () => {
        const e = this.d.outbox.record(accountId, 'webhook.test', { object: render(row) }, false);
        this.d.repo.insertDelivery(e.id, id, accountId, this.now());
        return e;
      },
      { immediate: true },
    );
    this.d.wake(id);
    return event;
  }

  /** The plaintext secret of a row (the dispatcher signs with it). */
  secretOf(row: WebhookRow): string {
    return decryptSecret(this.d.nodeSecret, row.secret_enc);
  }

  private async checkUrl(raw: string): Promise<string> {
    try {
      const u = checkUrlForm(raw, this.d.allowPrivate);
      await checkResolvedHost(u, this.d.allowPrivate);
      return raw;
    } catch (e) {
      if (e instanceof DestinationError) {
        if (e.code === 'url_not_allowed') throw new ApiError('url_not_allowed', e.message, { param: 'url' });
        throw paramInvalid('url', e.message);
      }
      throw e;
    }
  }

  private row(accountId: string, id: string): WebhookRow {
    const row = this.d.repo.get(id, accountId);
    if (!row) throw notFound('webhook', id);
    return row;
  }
}

/** The webhook object of a row (no secret). */
export function render(row: WebhookRow): WebhookObject {
  return {
    id: row.id,
    object: 'webhook',
    url: row.url,
    events: JSON.parse(row.events) as string[],
    description: row.description,
    status: row.status,
    createdAt: new Date(row.created_at).toISOString(),
  };
}
