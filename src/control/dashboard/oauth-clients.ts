/**
 * OAuth clients page: the account's registered applications (name, client id, type, exact redirect
 * URIs) and a register form; a confidential client's secret is shown once. Uses OAuthClients, like
 * `skylark oauth-clients create`.
 */
import { ApiError } from '../../base/errors/errors.js';
import type { OAuthClients } from '../oauth/clients.js';
import { csrfField, esc, tableWrap, time } from './html.js';
import type { Router } from './router.js';

/** Redirect URIs one client may register here. */
const MAX_REDIRECT_URIS = 10;

/** Registers `/dashboard/oauth-clients`. */
export function registerOAuthClientPages(router: Router, clients: OAuthClients, authUrl: () => string): void {
  router.get('/dashboard/oauth-clients', (r) => {
    const list = clients.list(r.account.id);
    const rows = list.map(
      (c) => `<tr><td>${esc(c.name)}</td><td><code class="break">${esc(c.id)}</code></td><td>${c.public ? 'Public (PKCE)' : 'Confidential'}</td>
<td><ul class="plain">${c.redirectUris.map((u) => `<li><code class="break">${esc(u)}</code></li>`).join('')}</ul></td><td>${time(c.createdAt)}</td></tr>`,
    );
    return r.page(
      'OAuth clients',
      'oauth',
      `<h1>OAuth clients</h1>
<p class="lead">Applications that act for Skylark accounts through OAuth 2.0 (authorization code + PKCE). Authorization server: <code>${esc(authUrl())}</code>.</p>
<section class="card" aria-labelledby="register-client">
<h2 id="register-client">Register an application</h2>
<form method="post" action="/dashboard/oauth-clients" class="stack">${csrfField(r.session.csrfToken)}
<div class="field"><label for="client-name">Name</label><input id="client-name" name="name" required maxlength="100"></div>
<div class="field"><label for="client-uris">Redirect URIs <span class="muted">(one per line; matched exactly)</span></label>
<textarea id="client-uris" name="redirect_uris" rows="3" required placeholder="https://app.example.com/callback" aria-describedby="client-uris-hint"></textarea>
<p id="client-uris-hint" class="muted small">https, http only on a loopback host, or a private-use scheme such as <code>com.example.app:/cb</code>.</p></div>
<fieldset class="checks"><legend>Client type</legend>
<label for="client-confidential"><input type="radio" id="client-confidential" name="type" value="confidential" checked> Confidential (a server that keeps a secret)</label>
<label for="client-public"><input type="radio" id="client-public" name="type" value="public"> Public (SPA or native app: PKCE, no secret)</label>
</fieldset>
<div><button type="submit" class="btn btn-primary">Register</button></div>
</form>
</section>
<section aria-labelledby="clients-list"><h2 id="clients-list">Registered applications</h2>
${tableWrap('OAuth clients', ['Name', 'Client ID', 'Type', 'Redirect URIs', 'Created'], rows, 'No applications registered yet.')}
</section>`,
    );
  });

  router.post('/dashboard/oauth-clients', () => '/dashboard/oauth-clients', (r) => {
    const uris = (r.form.get('redirect_uris') ?? '')
      .split(/\r?\n/)
      .map((u) => u.trim())
      .filter(Boolean);
    if (uris.length > MAX_REDIRECT_URIS) throw new ApiError('parameter_invalid', `At most ${MAX_REDIRECT_URIS} redirect URIs.`);
    let created: ReturnType<OAuthClients['create']>;
    try {
      created = clients.create({ name: (r.form.get('name') ?? '').slice(0, 100), redirectUris: uris, public: r.form.get('type') === 'public', accountId: r.account.id });
    } catch (e) {
      throw new ApiError('parameter_invalid', `Not registered: ${(e as Error).message}.`);
    }
    return r.redirect('/dashboard/oauth-clients', {
      notice: `Registered ${created.client.name}: client id ${created.clientId}.`,
      ...(created.clientSecret ? { secret: { label: 'Client secret', value: created.clientSecret } } : {}),
    });
  });
}
