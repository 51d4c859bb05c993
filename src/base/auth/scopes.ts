/**
 * OAuth scopes (spec "Scopes"): the seven scopes a third-party application may ask for, with the
 * words the consent page and the metadata use. `listener_tokens:write` is internal (publishable
 * keys); an OAuth token gets it through `streams:read` (docs/api-platform.md).
 */
import type { Scope } from './api-keys.js';

/** Scopes grantable through OAuth, in the spec's order, with what they allow. */
export const OAUTH_SCOPES = {
  'streams:read': 'List and retrieve streams',
  'streams:write': 'Create, update, delete streams',
  'podcasts:read': 'List and retrieve podcasts and episodes',
  'podcasts:write': 'Create, update, publish episodes',
  'webhooks:read': 'List webhook configurations',
  'webhooks:write': 'Create and delete webhook configurations',
  'account:read': 'Read account and billing information',
} as const satisfies Partial<Record<Scope, string>>;

export type OAuthScope = keyof typeof OAUTH_SCOPES;

/** Whether `s` is a grantable OAuth scope. */
export function isOAuthScope(s: string): s is OAuthScope {
  return Object.prototype.hasOwnProperty.call(OAUTH_SCOPES, s);
}

/**
 * Parses a space-separated `scope` parameter (RFC 6749 §3.3): scope-tokens separated by single
 * spaces; duplicates are dropped, order kept. Returns the unknown tokens separately.
 */
export function parseScope(raw: string): { scopes: OAuthScope[]; unknown: string[] } {
  const scopes: OAuthScope[] = [];
  const unknown: string[] = [];
  for (const t of raw.split(' ')) {
    if (t === '') continue;
    if (isOAuthScope(t)) {
      if (!scopes.includes(t)) scopes.push(t);
    } else unknown.push(t);
  }
  return { scopes, unknown };
}
