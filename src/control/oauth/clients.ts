/**
 * OAuth client registration (`skylark oauth-clients create`, the dashboard later). A client has a
 * `client_…` id, a name, exact redirect URIs and, when confidential, a `cs_…` secret returned once
 * and stored as its SHA-256. Public clients (SPAs, native apps) have no secret and must use PKCE.
 */
import type { OAuthClientRow, OAuthRepo } from '../../base/db/oauth-repo.js';
import { hashToken } from '../../base/auth/secrets.js';
import { newId, randomBase62 } from '../../base/ids.js';

/** A client as shown (never the secret). */
export interface OAuthClientObject {
  id: string;
  object: 'oauth_client';
  name: string;
  redirectUris: string[];
  public: boolean;
  accountId: string | null;
  createdAt: string;
}

export interface CreateClientInput {
  name: string;
  redirectUris: string[];
  public: boolean;
  accountId?: string | null | undefined;
}

/**
 * Why `uri` cannot be a redirect URI, or null when it can (RFC 6749 §3.1.2, RFC 8252 §7, RFC 9700
 * §4.1): an absolute URI without a fragment; `https`, `http` only to a loopback host, or a
 * private-use scheme with a dot (`com.example.app:/cb`).
 */
export function redirectUriProblem(uri: string): string | null {
  let u: URL;
  try {
    u = new URL(uri);
  } catch {
    return 'is not an absolute URI';
  }
  if (uri.includes('#')) return 'must not contain a fragment';
  if (u.protocol === 'https:') return null;
  if (u.protocol === 'http:') {
    return ['127.0.0.1', 'localhost', '[::1]'].includes(u.hostname) ? null : 'must use https (http only for loopback hosts)';
  }
  if (/^[a-z][a-z0-9+.-]*\.[a-z0-9+.-]+:$/i.test(u.protocol)) return null;
  return 'must use https, http on a loopback host, or a private-use scheme such as com.example.app:';
}

export class OAuthClients {
  constructor(private readonly repo: OAuthRepo, private readonly now: () => number = Date.now) {}

  /**
   * Registers a client. @returns the client and its secret (null for public clients), shown once
   * @throws Error naming the bad redirect URI, or when none or no name is given
   */
  create(input: CreateClientInput): { client: OAuthClientObject; clientId: string; clientSecret: string | null } {
    if (!input.name.trim()) throw new Error('a client needs a name');
    if (input.redirectUris.length === 0) throw new Error('a client needs at least one redirect URI');
    for (const u of input.redirectUris) {
      const p = redirectUriProblem(u);
      if (p) throw new Error(`redirect URI ${u} ${p}`);
    }
    const secret = input.public ? null : `cs_${randomBase62(40)}`;
    const row: Omit<OAuthClientRow, 'deleted_at'> = {
      id: newId('client'),
      name: input.name.trim(),
      secret_hash: secret ? hashToken(secret) : null,
      redirect_uris: JSON.stringify([...new Set(input.redirectUris)]),
      is_public: input.public ? 1 : 0,
      account_id: input.accountId ?? null,
      created_at: this.now(),
    };
    this.repo.insertClient(row);
    return { client: toClientObject({ ...row, deleted_at: null }), clientId: row.id, clientSecret: secret };
  }

  get(id: string): OAuthClientObject | undefined {
    const row = this.repo.client(id);
    return row && toClientObject(row);
  }

  /** The clients registered for `accountId` (never their secrets), newest first, at most `limit`. */
  list(accountId: string, limit = 100): OAuthClientObject[] {
    return this.repo.clientsOf(accountId, limit).map(toClientObject);
  }
}

export function toClientObject(r: OAuthClientRow): OAuthClientObject {
  return {
    id: r.id,
    object: 'oauth_client',
    name: r.name,
    redirectUris: JSON.parse(r.redirect_uris) as string[],
    public: r.is_public === 1,
    accountId: r.account_id,
    createdAt: new Date(r.created_at).toISOString(),
  };
}
