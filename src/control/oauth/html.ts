/**
 * The HTML of the authorization server: login, consent and error pages. Plain forms that work
 * without JavaScript (docs/behaviour.md §9 "OAuth"): login fields `email` and `password`, consent field
 * `decision` (`allow`|`deny`), each form with the hidden `csrf_token` and `request_id`. Every
 * interpolated value is HTML-escaped.
 */
import { OAUTH_SCOPES, type OAuthScope } from '../../base/auth/scopes.js';

/** Escapes text for HTML element content and double-quoted attributes. */
export function esc(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

const STYLE = `body{font:16px/1.5 system-ui,sans-serif;max-width:28rem;margin:3rem auto;padding:0 1rem;color:#1b1b1f}
h1{font-size:1.3rem}label{display:block;margin:.8rem 0 .2rem}input{width:100%;padding:.5rem;box-sizing:border-box}
button{padding:.55rem 1.2rem;margin:.8rem .5rem 0 0;font-size:1rem}ul{padding-left:1.2rem}.err{color:#a40000}.muted{color:#666;font-size:.9rem}
code{background:#f2f2f2;padding:0 .2rem}`;

function page(title: string, body: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>${esc(title)} · Skylark</title><style>${STYLE}</style></head>
<body>${body}</body></html>
`;
}

const hidden = (csrf: string, requestId: string) =>
  `<input type="hidden" name="csrf_token" value="${esc(csrf)}"><input type="hidden" name="request_id" value="${esc(requestId)}">`;

/** The owner login form, posted to /oauth/authorize. */
export function loginPage(o: { clientName: string; csrf: string; requestId: string; error?: string | undefined; email?: string | undefined }): string {
  return page(
    'Sign in',
    `<h1>Sign in to Skylark</h1>
<p><strong>${esc(o.clientName)}</strong> wants to access your Skylark account. Sign in to continue.</p>
${o.error ? `<p class="err" role="alert">${esc(o.error)}</p>` : ''}
<form method="post" action="/oauth/authorize">
${hidden(o.csrf, o.requestId)}
<label for="email">Email</label><input id="email" name="email" type="email" autocomplete="username" required value="${esc(o.email ?? '')}">
<label for="password">Password</label><input id="password" name="password" type="password" autocomplete="current-password" required>
<button type="submit">Sign in</button>
</form>`,
  );
}

/** The consent page: who asks, for which account, which scopes; Allow or Deny. */
export function consentPage(o: {
  clientName: string;
  redirectOrigin: string;
  scopes: OAuthScope[];
  accountName: string;
  email: string;
  csrf: string;
  requestId: string;
}): string {
  return page(
    'Authorize',
    `<h1>Authorize ${esc(o.clientName)}</h1>
<p><strong>${esc(o.clientName)}</strong> asks to act for the account <strong>${esc(o.accountName)}</strong> (${esc(o.email)}) with these permissions:</p>
<ul>${o.scopes.map((s) => `<li><code>${esc(s)}</code>: ${esc(OAUTH_SCOPES[s])}</li>`).join('')}</ul>
<p class="muted">After your answer you go back to <code>${esc(o.redirectOrigin)}</code>.</p>
<form method="post" action="/oauth/authorize">
${hidden(o.csrf, o.requestId)}
<button type="submit" name="decision" value="allow">Allow</button>
<button type="submit" name="decision" value="deny">Deny</button>
</form>
<form method="post" action="/oauth/authorize">
${hidden(o.csrf, o.requestId)}
<button type="submit" name="switch_account" value="1" class="muted">Use another account</button>
</form>`,
  );
}

/** An error shown to the user instead of redirecting (unknown client, unregistered redirect URI, lost session). */
export function errorPage(title: string, message: string): string {
  return page(title, `<h1>${esc(title)}</h1><p class="err">${esc(message)}</p><p class="muted">Go back to the application and start again.</p>`);
}
