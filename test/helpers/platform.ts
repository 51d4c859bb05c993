/**
 * Test helpers of the API platform: a minimal cookie-keeping "browser" that submits the
 * OAuth login and consent forms as a user would (plain HTML forms, no JavaScript), and an ajv 2020-12
 * validator of answers against the server's own OpenAPI document.
 */
import { Ajv2020 } from 'ajv/dist/2020.js';
import type { ValidateFunction } from 'ajv';
import type { RunningServer } from '../../src/main.js';
import type { ObservedResponse } from '../../src/base/http/server.js';

/** An HTTP client that keeps cookies (one jar) and does not follow redirects. */
export class Browser {
  readonly cookies = new Map<string, string>();
  /** Set-Cookie lines seen, for attribute checks. */
  readonly setCookies: string[] = [];

  async request(url: string, init: { method?: string; form?: Record<string, string>; headers?: Record<string, string> } = {}) {
    const headers: Record<string, string> = { ...init.headers };
    if (this.cookies.size) headers.cookie = [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
    if (init.form) headers['content-type'] = 'application/x-www-form-urlencoded';
    const res = await fetch(url, { method: init.method ?? (init.form ? 'POST' : 'GET'), headers, body: init.form ? new URLSearchParams(init.form).toString() : undefined, redirect: 'manual' });
    for (const line of res.headers.getSetCookie()) {
      this.setCookies.push(line);
      const [pair] = line.split(';');
      const i = pair!.indexOf('=');
      const name = pair!.slice(0, i).trim();
      const value = pair!.slice(i + 1).trim();
      if (/max-age=0/i.test(line) || value === '') this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
    return { status: res.status, headers: res.headers, text: await res.text(), location: res.headers.get('location') };
  }
}

/** The hidden inputs and the submit buttons (`name=value`) of the first form in `html` that contains `marker`. */
export function formFields(html: string, marker: string): { action: string; hidden: Record<string, string> } {
  const forms = html.split(/<form\b/).slice(1);
  const form = forms.find((f) => f.includes(marker));
  if (!form) throw new Error(`no form with ${marker} in:\n${html}`);
  const action = /action="([^"]*)"/.exec(form)?.[1] ?? '';
  const hidden: Record<string, string> = {};
  for (const m of form.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)) hidden[m[1]!] = unescapeHtml(m[2]!);
  return { action, hidden };
}

const unescapeHtml = (s: string) => s.replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');

/**
 * Walks a browser through GET /oauth/authorize → login form (when not logged in) → consent →
 * `decision`. Resolves to the final redirect `Location` (the client's callback URL).
 * @throws Error when a page is not what a user would expect
 */
export async function authorizeInBrowser(
  browser: Browser,
  authorizeUrl: string,
  o: { email: string; password: string; decision: 'allow' | 'deny' },
): Promise<string> {
  const origin = new URL(authorizeUrl).origin;
  let page = await browser.request(authorizeUrl);
  if (page.status === 302) return page.location!;
  if (page.text.includes('name="password"')) {
    const login = formFields(page.text, 'name="password"');
    page = await browser.request(origin + login.action, { form: { ...login.hidden, email: o.email, password: o.password } });
    if (page.status !== 200) throw new Error(`login failed: ${page.status} ${page.text}`);
  }
  const consent = formFields(page.text, 'name="decision"');
  const done = await browser.request(origin + consent.action, { form: { ...consent.hidden, decision: o.decision } });
  if (done.status !== 303 || !done.location) throw new Error(`consent did not redirect: ${done.status} ${done.text}`);
  return done.location;
}

type Doc = { paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, { schema: unknown }> }> }>>; components: unknown };

/** Checkers attached to servers still running (startInProcess), for the per-test hook in ./openapi-setup.ts. */
const attached = new Set<OpenApiChecker>();

/**
 * The problems found since the last call by every attached checker (see `OpenApiChecker.attach`),
 * each prefixed by the checker's label. The vitest setup file fails the running test with them.
 */
export function takeOpenApiProblems(): string[] {
  const out: string[] = [];
  for (const c of attached) out.push(...c.takeNew().map((p) => `${c.label}: ${p}`));
  return out;
}

/** Validates JSON answers against the OpenAPI document with ajv (JSON Schema 2020-12). */
export class OpenApiChecker {
  /** Names the server in problem reports (e.g. its base URL). */
  label = 'server';
  /** How many of `problems` were already handed out by `takeNew`. */
  private reported = 0;
  private readonly ajv = new Ajv2020({ strict: false, validateFormats: false, allErrors: true });
  private readonly cache = new Map<string, ValidateFunction>();
  readonly checked: string[] = [];
  readonly problems: string[] = [];

  constructor(readonly doc: Doc) {
    this.ajv.addSchema({ $id: 'openapi.json', components: doc.components } as object);
  }

  /** The problems of one answer (empty when it conforms); `pattern` as registered (`/v2/streams/:id`). */
  check(method: string, pattern: string, status: number, body: unknown): string[] {
    const path = pattern.replace(/^\/v2/, '').replace(/:([A-Za-z0-9_]+)/g, '{$1}');
    // HEAD answers what GET would, without the body (RFC 9110 §9.3.2): the document lists GET only.
    const op = this.doc.paths[path]?.[method === 'HEAD' ? 'get' : method.toLowerCase()];
    if (!op) return [`${method} ${path} is not in the OpenAPI document`];
    const res = op.responses[String(status)];
    if (!res) return [`${method} ${path} answered ${status}, which the document does not list`];
    const schema = res.content?.['application/json']?.schema;
    if (!schema) return [];
    const key = `${method} ${path} ${status}`;
    let v = this.cache.get(key);
    if (!v) {
      v = this.ajv.compile(rewriteRefs(schema) as object);
      this.cache.set(key, v);
    }
    this.checked.push(key);
    return v(body) ? [] : [`${key}: ${this.ajv.errorsText(v.errors)} in ${JSON.stringify(body).slice(0, 300)}`];
  }

  /** The problems added since the last call. */
  takeNew(): string[] {
    const out = this.problems.slice(this.reported);
    this.reported = this.problems.length;
    return out;
  }

  /**
   * Like `observe`, and registers the checker so that the vitest setup file
   * (test/helpers/openapi-setup.ts) fails the running test when an answer does not conform.
   * `detach` when the server closes.
   */
  attach(server: RunningServer, label: string): void {
    this.label = label;
    this.observe(server);
    attached.add(this);
  }

  /** Stops reporting to the per-test hook (the server closed). */
  detach(): void {
    attached.delete(this);
  }

  /** Checks every `/v2` JSON answer `server` sends from now on; problems collect in `problems`. */
  observe(server: RunningServer): void {
    server.http.observeResponses((r: ObservedResponse) => {
      if (!r.pattern || !r.pattern.startsWith('/v2/') || !r.headers['Content-Type']?.startsWith('application/json')) return;
      let body: unknown;
      try {
        body = JSON.parse(r.body);
      } catch {
        this.problems.push(`${r.method} ${r.url}: not JSON`);
        return;
      }
      this.problems.push(...this.check(r.method, r.pattern, r.status, body));
    });
  }
}

/** `#/components/…` → `openapi.json#/components/…` (the components live in a schema added under that id). */
function rewriteRefs(s: unknown): unknown {
  if (Array.isArray(s)) return s.map(rewriteRefs);
  if (s && typeof s === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(s)) out[k] = k === '$ref' && typeof v === 'string' && v.startsWith('#/') ? `openapi.json${v}` : rewriteRefs(v);
    return out;
  }
  return s;
}
