/**
 * The dashboard's HTML building blocks: the page layout (skip link, navigation, main landmark),
 * flash messages, the copy field (value + copy button), status badges, forms with the CSRF token.
 * Every interpolated value goes through `esc`; nothing here knows HTTP or a service.
 */
import { esc } from '../oauth/html.js';
import type { AssetUrls } from './assets.js';

export { esc };

/** What a one-time message shows after a POST-redirect-GET (kept in the session's flash, never in a URL). */
export interface Flash {
  notice?: string;
  error?: string;
  /** A secret shown once (a new API key, signing secret, client secret). */
  secret?: { label: string; value: string; note?: string };
}

/** Sections of the navigation, in order. */
export const NAV = [
  ['overview', '/dashboard', 'Overview'],
  ['streams', '/dashboard/streams', 'Streams'],
  ['podcasts', '/dashboard/podcasts', 'Podcasts'],
  ['webhooks', '/dashboard/webhooks', 'Webhooks'],
  ['keys', '/dashboard/keys', 'API keys'],
  ['oauth', '/dashboard/oauth-clients', 'OAuth clients'],
] as const;
export type Section = (typeof NAV)[number][0] | 'none';

/** What every page of the signed-in area knows. */
export interface PageFrame {
  assets: AssetUrls;
  csrf: string;
  accountName: string;
  email: string;
  section: Section;
  flash: Flash[];
  /** Extra page scripts (asset URLs), loaded with `defer`. */
  scripts?: string[];
}

/** The hidden CSRF field every form carries. */
export const csrfField = (csrf: string) => `<input type="hidden" name="csrf_token" value="${esc(csrf)}">`;

/** A one-button POST form (the button's label, optional hidden fields, optional class). */
export function postButton(action: string, csrf: string, label: string, o: { fields?: Record<string, string>; cls?: string; ariaLabel?: string } = {}): string {
  const hidden = Object.entries(o.fields ?? {})
    .map(([k, v]) => `<input type="hidden" name="${esc(k)}" value="${esc(v)}">`)
    .join('');
  const aria = o.ariaLabel ? ` aria-label="${esc(o.ariaLabel)}"` : '';
  return `<form method="post" action="${esc(action)}" class="inline">${csrfField(csrf)}${hidden}<button type="submit" class="${esc(o.cls ?? 'btn')}"${aria}>${esc(label)}</button></form>`;
}

/** A read-only value with a copy button; `secret` hides it until "Show" is pressed. */
export function copyField(id: string, label: string, value: string, o: { secret?: boolean; mono?: boolean } = {}): string {
  const type = o.secret ? 'password' : 'text';
  const reveal = o.secret
    ? `<button type="button" class="btn btn-small" data-reveal="${esc(id)}" aria-controls="${esc(id)}" aria-pressed="false">Show</button>`
    : '';
  return `<div class="field copy-field">
<label for="${esc(id)}">${esc(label)}</label>
<div class="copy-row"><input id="${esc(id)}" type="${type}" readonly value="${esc(value)}" class="mono" spellcheck="false" autocomplete="off">${reveal}<button type="button" class="btn btn-small" data-copy="${esc(id)}">Copy</button></div>
</div>`;
}

/** A status badge (`live`, `idle`, `ended`, `active`, `disabled`, `delivered`, …). */
export function badge(status: string): string {
  return `<span class="badge badge-${esc(status.replace(/[^a-z_]/g, ''))}">${esc(status)}</span>`;
}

/** `2026-05-01T09:00:00.000Z` → `2026-05-01 09:00:00 UTC` inside a `<time>`. */
export function time(iso: string | null | undefined): string {
  if (!iso) return '<span class="muted">—</span>';
  return `<time datetime="${esc(iso)}">${esc(iso.replace('T', ' ').replace(/\.\d+Z$|Z$/, ' UTC'))}</time>`;
}

/** Unix ms → ISO. */
export const isoMs = (ms: number) => new Date(ms).toISOString();

function flashHtml(f: Flash): string {
  let out = '';
  if (f.error) out += `<div class="flash flash-error" role="alert">${esc(f.error)}</div>`;
  if (f.notice) out += `<div class="flash flash-notice" role="status">${esc(f.notice)}</div>`;
  if (f.secret) {
    out += `<section class="flash flash-secret" aria-labelledby="secret-title">
<h2 id="secret-title">${esc(f.secret.label)}</h2>
<p>${esc(f.secret.note ?? 'Copy it now: it is shown only once and cannot be shown again.')}</p>
${copyField('one-time-secret', f.secret.label, f.secret.value)}
</section>`;
  }
  return out;
}

function head(title: string, assets: AssetUrls, scripts: string[]): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>${esc(title)} · Skylark</title>
<link rel="icon" type="image/svg+xml" href="${esc(assets.icon)}">
<link rel="stylesheet" href="${esc(assets.css)}">
<script src="${esc(assets.common)}" defer></script>
${scripts.map((s) => `<script src="${esc(s)}" defer></script>`).join('\n')}
</head>`;
}

/** A signed-in page: header with the navigation and sign-out, flash messages, then `body` in `<main>`. */
export function layout(title: string, f: PageFrame, body: string): string {
  const nav = NAV.map(
    ([key, href, label]) => `<li><a href="${href}"${key === f.section ? ' aria-current="page"' : ''}>${esc(label)}</a></li>`,
  ).join('');
  return `${head(title, f.assets, f.scripts ?? [])}
<body>
<a class="skip" href="#main">Skip to content</a>
<header class="top">
<div class="brand"><a href="/dashboard">Skylark</a></div>
<nav aria-label="Dashboard"><ul>${nav}</ul></nav>
<div class="who"><span class="muted" title="${esc(f.email)}">${esc(f.accountName)}</span>
<form method="post" action="/dashboard/logout" class="inline">${csrfField(f.csrf)}<button type="submit" class="btn btn-small btn-quiet">Sign out</button></form></div>
</header>
<main id="main" tabindex="-1">
${f.flash.map(flashHtml).join('\n')}
${body}
</main>
</body></html>
`;
}

/** The sign-in page (no navigation). */
export function loginPage(o: { assets: AssetUrls; csrf: string; next: string; email?: string; error?: string }): string {
  return `${head('Sign in', o.assets, [])}
<body class="narrow">
<main id="main">
<h1>Sign in to the Skylark dashboard</h1>
${o.error ? `<div class="flash flash-error" role="alert">${esc(o.error)}</div>` : ''}
<form method="post" action="/dashboard/login" class="card stack">
${csrfField(o.csrf)}<input type="hidden" name="next" value="${esc(o.next)}">
<div class="field"><label for="email">Email</label><input id="email" name="email" type="email" autocomplete="username" required value="${esc(o.email ?? '')}"></div>
<div class="field"><label for="password">Password</label><input id="password" name="password" type="password" autocomplete="current-password" required></div>
<button type="submit" class="btn btn-primary">Sign in</button>
</form>
<p class="muted">The account owner's email and password (<code>skylark accounts create --email … --password …</code>).</p>
</main>
</body></html>
`;
}

/** A confirmation step for a destructive action: the same POST again with `confirm=yes`. */
export function confirmBody(o: { title: string; message: string; action: string; csrf: string; button: string; back: string; fields?: Record<string, string> }): string {
  return `<h1>${esc(o.title)}</h1>
<div class="card stack">
<p>${esc(o.message)}</p>
<div class="actions">
${postButton(o.action, o.csrf, o.button, { fields: { ...o.fields, confirm: 'yes' }, cls: 'btn btn-danger' })}
<a class="btn" href="${esc(o.back)}">Cancel</a>
</div>
</div>`;
}

/** A simple error page body (404 and friends). */
export function errorBody(title: string, message: string): string {
  return `<h1>${esc(title)}</h1><p>${esc(message)}</p><p><a href="/dashboard">Back to the dashboard</a></p>`;
}

/** Wraps a table so it scrolls sideways on narrow screens instead of overflowing the page. */
export const tableWrap = (caption: string, headers: string[], rows: string[], empty: string) =>
  rows.length === 0
    ? `<p class="muted">${esc(empty)}</p>`
    : `<div class="table-wrap" tabindex="0" role="region" aria-label="${esc(caption)}"><table><caption class="sr-only">${esc(caption)}</caption>
<thead><tr>${headers.map((h) => `<th scope="col">${esc(h)}</th>`).join('')}</tr></thead>
<tbody>${rows.join('\n')}</tbody></table></div>`;
