/**
 * Episode descriptions with HTML in the feed (docs/podcasts.md "Show notes"): the sanitised HTML
 * goes into `content:encoded` (RSS 2.0 content module) and its plain text into `description` and
 * `itunes:summary`. Pure functions over strings.
 *
 * The sanitiser never copies markup through: it reads the input as a sequence of tags and text
 * (HTML tokenisation reduced to what a description holds: tags, comments, declarations) and
 * writes a new document from it — each kept tag re-emitted from its lower-cased name and its
 * allowed attributes (values re-escaped), every text run escaped, everything else dropped
 * (`script`, `style` and similar elements with their content). The kept tags are those podcast
 * apps render in show notes (Apple Podcasts: `p`, `ol`, `ul`, `li`, `a`; most apps also `br`,
 * `b`, `strong`, `i`, `em`, `blockquote`); links keep only `http:`, `https:` and `mailto:`
 * targets. Unclosed kept elements are closed at the end, stray end tags dropped.
 */

/** Tags kept in `content:encoded`. */
const ALLOWED = new Set(['p', 'br', 'a', 'b', 'strong', 'i', 'em', 'u', 'ul', 'ol', 'li', 'blockquote']);
/** Void elements (no end tag). */
const VOID = new Set(['br']);
/** Elements dropped with everything inside them. */
const DROP_CONTENT = new Set(['script', 'style', 'iframe', 'object', 'embed', 'template', 'noscript', 'svg', 'math', 'textarea', 'title', 'head']);
/** Block-level tags: in plain text they become line breaks. */
const BLOCK = new Set(['p', 'br', 'li', 'ul', 'ol', 'blockquote', 'div', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'tr', 'hr']);

/** One token: a tag (start or end) with its raw attributes text, or text. */
type Token = { kind: 'text'; text: string } | { kind: 'start' | 'end'; name: string; attrs: string };

/** Matches a start tag, an end tag, a comment, or a declaration / processing instruction. */
const TAG = /<(\/?)([a-zA-Z][a-zA-Z0-9-]*)((?:\s+[^\s"'>/=]+(?:\s*=\s*(?:"[^"]*"|'[^']*'|[^\s"'=<>`]+))?)*)\s*\/?>|<!--[\s\S]*?(?:-->|$)|<![^>]*(?:>|$)|<\?[^>]*(?:>|$)/g;

function tokenize(html: string): Token[] {
  const out: Token[] = [];
  let last = 0;
  for (const m of html.matchAll(TAG)) {
    if (m.index > last) out.push({ kind: 'text', text: html.slice(last, m.index) });
    last = m.index + m[0].length;
    if (m[2] !== undefined) out.push({ kind: m[1] ? 'end' : 'start', name: m[2].toLowerCase(), attrs: m[3] ?? '' });
  }
  if (last < html.length) out.push({ kind: 'text', text: html.slice(last) });
  return out;
}

/** Whether `s` holds markup (a tag, a comment or a character reference), i.e. is meant as HTML. */
export function looksLikeHtml(s: string): boolean {
  return /<\/?[a-zA-Z][^>]*>|<!--|&(#\d+|#x[0-9a-fA-F]+|[a-zA-Z][a-zA-Z0-9]*);/.test(s);
}

/** Escapes text for HTML, keeping character references that are already there. */
function escapeText(s: string): string {
  return s.replace(/&(?!(#\d{1,7}|#x[0-9a-fA-F]{1,6}|[a-zA-Z][a-zA-Z0-9]{1,31});)/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** The value of attribute `name` in a tag's raw attribute text, entities decoded; undefined when absent. */
function attr(attrs: string, name: string): string | undefined {
  const re = /([^\s"'>/=]+)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'=<>`]+)))?/g;
  for (const m of attrs.matchAll(re)) if (m[1]!.toLowerCase() === name) return decodeEntities(m[2] ?? m[3] ?? m[4] ?? '');
  return undefined;
}

/** A link target kept in `content:encoded`: http(s) or mailto, with no control characters. */
function safeHref(href: string | undefined): string | null {
  if (href === undefined) return null;
  const h = href.replace(/[\u0000-\u0020\u007f]+/g, '');
  return /^(https?:\/\/|mailto:)/i.test(h) && h.length <= 2048 ? h : null;
}

const escapeAttr = (s: string) => s.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/**
 * Sanitises `html` to the tags podcast apps render in show notes (see the module comment).
 * Returns well-formed HTML: only allowed tags, balanced, attributes limited to `a href` (with
 * `rel="nofollow noopener"`), text escaped.
 */
export function sanitizeHtml(html: string): string {
  const out: string[] = [];
  const open: string[] = [];
  let dropping: string | null = null;
  for (const t of tokenize(html)) {
    if (dropping !== null) {
      if (t.kind === 'end' && t.name === dropping) dropping = null;
      continue;
    }
    if (t.kind === 'text') {
      out.push(escapeText(t.text));
    } else if (t.kind === 'start') {
      if (DROP_CONTENT.has(t.name)) dropping = t.name;
      else if (ALLOWED.has(t.name)) out.push(startTag(t.name, t.attrs, open));
    } else if (ALLOWED.has(t.name) && !VOID.has(t.name) && open.includes(t.name)) {
      // Close up to the matching element (what a browser does with misnested inline tags).
      for (let name = open.pop(); name !== undefined; name = open.pop()) {
        out.push(`</${name}>`);
        if (name === t.name) break;
      }
    }
  }
  while (open.length > 0) out.push(`</${open.pop()!}>`);
  return out.join('');
}

function startTag(name: string, attrs: string, open: string[]): string {
  if (VOID.has(name)) return `<${name}>`;
  open.push(name);
  if (name !== 'a') return `<${name}>`;
  const href = safeHref(attr(attrs, 'href'));
  return href ? `<a href="${escapeAttr(href)}" rel="nofollow noopener">` : '<a>';
}

/** Named character references decoded in plain text (the common ones; others stay as written). */
const NAMED: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: '\u00a0', ndash: '–', mdash: '—', hellip: '…', lsquo: '‘', rsquo: '’', ldquo: '“', rdquo: '”', copy: '©', reg: '®', trade: '™', eacute: 'é', egrave: 'è', euro: '€' };

/** Decodes numeric and common named character references. */
export function decodeEntities(s: string): string {
  return s.replace(/&(#\d{1,7}|#x[0-9a-fA-F]{1,6}|[a-zA-Z][a-zA-Z0-9]{1,31});/g, (all, ref: string) => {
    if (ref[0] === '#') {
      const code = ref[1] === 'x' || ref[1] === 'X' ? parseInt(ref.slice(2), 16) : parseInt(ref.slice(1), 10);
      return code > 0 && code <= 0x10ffff && (code < 0xd800 || code > 0xdfff) ? String.fromCodePoint(code) : '';
    }
    return NAMED[ref] ?? all;
  });
}

/**
 * The plain text of `html`: tags removed (the content of script-like elements too), block tags
 * as line breaks, character references decoded, runs of spaces and blank lines collapsed.
 */
export function htmlToText(html: string): string {
  const out: string[] = [];
  let dropping: string | null = null;
  for (const t of tokenize(html)) {
    if (dropping !== null) {
      if (t.kind === 'end' && t.name === dropping) dropping = null;
      continue;
    }
    if (t.kind === 'text') out.push(decodeEntities(t.text).replace(/\s+/g, ' '));
    else if (t.kind === 'start' && DROP_CONTENT.has(t.name)) dropping = t.name;
    else if (BLOCK.has(t.name)) out.push('\n');
  }
  return out
    .join('')
    .split('\n')
    .map((l) => l.trim())
    .join('\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
}
