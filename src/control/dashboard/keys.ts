/**
 * API keys page: the account's keys (prefix and last 4 only), create (the key shown once, with a
 * copy button), roll and revoke, each behind a confirmation step. Uses AccountsService, like the
 * `skylark keys …` CLI.
 */
import { ApiError } from '../../base/errors/errors.js';
import type { AccountsService } from '../services/accounts.js';
import type { WebReply } from '../../base/http/server.js';
import { unconfirmed } from './confirm.js';
import { badge, csrfField, esc, postButton, tableWrap, time } from './html.js';
import type { DashRequest, Router } from './router.js';

const KEY_ID = /^key_[A-Za-z0-9]+$/;
const TYPE_LABEL = { secret: 'Secret', publishable: 'Publishable' } as const;

/** Registers `/dashboard/keys…`. */
export function registerKeyPages(router: Router, accounts: AccountsService): void {
  router.get('/dashboard/keys', (r) => keysPage(accounts, r));
  router.post('/dashboard/keys', () => '/dashboard/keys', (r) => createKey(accounts, r));
  router.post('/dashboard/keys/:id/roll', () => '/dashboard/keys', (r) => rollKey(accounts, r));
  router.post('/dashboard/keys/:id/revoke', () => '/dashboard/keys', (r) => revokeKey(accounts, r));
}

/** The account's key `id`. @throws ApiError 404 `resource_missing` for another account's key or no key */
function keyOf(accounts: AccountsService, accountId: string, id: string) {
  const k = KEY_ID.test(id) ? accounts.listKeys(accountId).find((x) => x.id === id) : undefined;
  if (!k) throw new ApiError('resource_missing', `No such API key: '${id}'.`);
  return k;
}

/** A key as the page shows it: `svc_sk_…abcd`. */
const masked = (k: { prefix: string; last4: string }) => `${k.prefix}…${k.last4}`;

/** The 409 of a key revoked already (`key_revoked`). */
const alreadyRevoked = () => new ApiError('key_revoked', 'This key is already revoked.', { status: 409 });

/** GET `/dashboard/keys`: the keys and the create form. */
function keysPage(accounts: AccountsService, r: DashRequest): WebReply {
  const keys = accounts.listKeys(r.account.id);
  const csrf = r.session.csrfToken;
  const rows = keys.map(
    (k) => `<tr${k.revokedAt ? ' class="row-muted"' : ''}>
<td>${TYPE_LABEL[k.type]}</td><td><code>${esc(masked(k))}</code></td><td>${time(k.createdAt)}</td>
<td>${k.revokedAt ? `${badge('revoked')} ${time(k.revokedAt)}` : badge('active')}</td>
<td class="actions">${
      k.revokedAt
        ? ''
        : postButton(`/dashboard/keys/${k.id}/roll`, csrf, 'Roll…', { cls: 'btn btn-small', ariaLabel: `Roll key ${masked(k)}` }) +
          postButton(`/dashboard/keys/${k.id}/revoke`, csrf, 'Revoke…', { cls: 'btn btn-small btn-danger', ariaLabel: `Revoke key ${masked(k)}` })
    }</td></tr>`,
  );
  return r.page(
    'API keys',
    'keys',
    `<h1>API keys</h1>
<p class="lead">Secret keys (<code>svc_sk_</code>) have full access to the API; publishable keys (<code>svc_pk_</code>) read streams, podcasts and stats and create listener tokens. Only the first characters and the last 4 are kept visible.</p>
<section class="card" aria-labelledby="create-key">
<h2 id="create-key">Create a key</h2>
<form method="post" action="/dashboard/keys" class="row-form">${csrfField(csrf)}
<div class="field"><label for="key-type">Type</label><select id="key-type" name="type"><option value="secret">Secret</option><option value="publishable">Publishable</option></select></div>
<button type="submit" class="btn btn-primary">Create key</button>
</form>
</section>
<section aria-labelledby="keys-list"><h2 id="keys-list">Keys</h2>
${tableWrap('API keys', ['Type', 'Key', 'Created', 'Status', 'Actions'], rows, 'No keys.')}
</section>`,
  );
}

/** POST `/dashboard/keys`: creates a key of the form's `type`; it is shown once. */
function createKey(accounts: AccountsService, r: DashRequest): WebReply {
  const type = r.form.get('type');
  if (type !== 'secret' && type !== 'publishable') throw new ApiError('parameter_invalid', 'Choose a key type: secret or publishable.');
  const { key } = accounts.createKey(r.account.id, type);
  return r.redirect('/dashboard/keys', { secret: { label: `New ${type} key`, value: key } });
}

/** POST `/dashboard/keys/:id/roll`: replaces the key (the new one shown once), once confirmed. */
function rollKey(accounts: AccountsService, r: DashRequest): WebReply {
  const k = keyOf(accounts, r.account.id, r.params[0]!);
  const ask = unconfirmed(r, 'Roll key', 'keys', {
    title: `Roll ${k.type} key ${masked(k)}?`,
    message: 'A new key replaces this one. The old key stops working at once: every client using it gets key_revoked until you give it the new key.',
    action: `/dashboard/keys/${k.id}/roll`,
    button: 'Roll key',
    back: '/dashboard/keys',
  });
  if (ask) return ask;
  if (k.revokedAt) throw alreadyRevoked();
  let fresh: { key: string };
  try {
    fresh = accounts.rollKey(k.id, r.account.id);
  } catch {
    throw alreadyRevoked();
  }
  return r.redirect('/dashboard/keys', { notice: `Key ${masked(k)} was rolled and no longer works.`, secret: { label: `New ${k.type} key`, value: fresh.key } });
}

/** POST `/dashboard/keys/:id/revoke`: revokes the key, once confirmed. */
function revokeKey(accounts: AccountsService, r: DashRequest): WebReply {
  const k = keyOf(accounts, r.account.id, r.params[0]!);
  const ask = unconfirmed(r, 'Revoke key', 'keys', {
    title: `Revoke ${k.type} key ${masked(k)}?`,
    message: 'The key stops working at once and cannot be restored.',
    action: `/dashboard/keys/${k.id}/revoke`,
    button: 'Revoke key',
    back: '/dashboard/keys',
  });
  if (ask) return ask;
  try {
    accounts.revokeKey(k.id, r.account.id);
  } catch {
    throw alreadyRevoked();
  }
  return r.redirect('/dashboard/keys', { notice: `Key ${masked(k)} was revoked.` });
}
