/** Small pure pieces of the platform: redirect-URI rules, scope parsing, cookies, canonical JSON for idempotency, HTML escaping. */
import { describe, expect, it } from 'vitest';
import { redirectUriProblem } from '../../../../src/control/oauth/clients.js';
import { parseScope } from '../../../../src/base/auth/scopes.js';
import { readCookie } from '../../../../src/base/auth/sessions.js';
import { canonicalJson } from '../../../../src/base/http/idempotency.js';
import { esc } from '../../../../src/control/oauth/html.js';
import { allows, type Principal } from '../../../../src/base/auth/api-keys.js';

describe('redirect URIs (RFC 6749 §3.1.2, RFC 8252, RFC 9700)', () => {
  it('https, loopback http and private-use schemes only; no fragments', () => {
    for (const ok of ['https://a.example/cb', 'https://a.example/cb?x=1', 'http://127.0.0.1:9/cb', 'http://localhost/cb', 'http://[::1]:8/cb', 'com.example.app:/oauth']) {
      expect(redirectUriProblem(ok), ok).toBeNull();
    }
    for (const bad of ['http://a.example/cb', 'https://a.example/cb#x', 'javascript:alert(1)', 'data:text/html,x', 'cb', '']) {
      expect(redirectUriProblem(bad), bad).not.toBeNull();
    }
  });
});

describe('scopes', () => {
  it('parses space-separated scopes, dropping duplicates and reporting unknown ones', () => {
    expect(parseScope('streams:read  account:read streams:read')).toEqual({ scopes: ['streams:read', 'account:read'], unknown: [] });
    expect(parseScope('streams:read listener_tokens:write admin').unknown).toEqual(['listener_tokens:write', 'admin']);
  });

  it('OAuth principals get exactly their scopes (streams:read also allows listener tokens)', () => {
    const p: Principal = { accountId: 'a', kind: 'oauth_token', keyId: 'j', scopes: new Set(['streams:read']), clientId: 'c' };
    expect(allows(p, 'streams:read')).toBe(true);
    expect(allows(p, 'listener_tokens:write')).toBe(true);
    expect(allows(p, 'streams:write')).toBe(false);
    expect(allows(p, 'account:read')).toBe(false);
    expect(allows({ accountId: 'a', kind: 'publishable_key', keyId: 'k' }, 'account:read')).toBe(false);
    expect(allows({ accountId: 'a', kind: 'secret_key', keyId: 'k' }, 'account:read')).toBe(true);
  });
});

describe('helpers', () => {
  it('reads one cookie by exact name', () => {
    expect(readCookie('a=1; skylark_session=abc; b=2', 'skylark_session')).toBe('abc');
    expect(readCookie('xskylark_session=abc', 'skylark_session')).toBeNull();
    expect(readCookie('', 'x')).toBeNull();
  });

  it('canonical JSON ignores key order, not values', () => {
    expect(canonicalJson({ b: 1, a: { d: [1, { y: 2, x: 1 }], c: null } })).toBe('{"a":{"c":null,"d":[1,{"x":1,"y":2}]},"b":1}');
    expect(canonicalJson({ a: 1 })).not.toBe(canonicalJson({ a: '1' }));
  });

  it('escapes HTML', () => {
    expect(esc(`<a href="x" onclick='y'>&</a>`)).toBe('&lt;a href=&quot;x&quot; onclick=&#39;y&#39;&gt;&amp;&lt;/a&gt;');
  });
});
