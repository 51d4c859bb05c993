/**
 * The show-notes sanitiser and text extraction (src/control/feed/html.ts, docs/podcasts.md "Show
 * notes"): only the allowed tags come out, balanced, with links to http(s)/mailto only; scripts,
 * event handlers, styles and comments never do, however the input is cut or nested; the plain text
 * keeps the words.
 */
import { describe, expect, it } from 'vitest';
import { htmlToText, looksLikeHtml, sanitizeHtml } from '../../../../src/control/feed/html.js';

describe('sanitizeHtml', () => {
  it('keeps the show-notes tags and rebuilds links', () => {
    expect(sanitizeHtml('<P CLASS="x">Hi <STRONG>there</STRONG><br/>and <a title="t" href=\'https://e.com/?a=1&amp;b=2\'>link</a></P>')).toBe(
      '<p>Hi <strong>there</strong><br>and <a href="https://e.com/?a=1&amp;b=2" rel="nofollow noopener">link</a></p>',
    );
    expect(sanitizeHtml('<ul><li>one<li>two</ul>')).toBe('<ul><li>one<li>two</li></li></ul>');
  });

  it('drops scripts, handlers, styles, comments and unsafe links', () => {
    const cases = [
      '<script>alert(1)</script>',
      '<img src=x onerror=alert(1)>',
      '<a href="javascript:alert(1)">x</a>',
      '<a href=" java\tscript:alert(1)">x</a>',
      '<a href="data:text/html;base64,PHNjcmlwdD4=">x</a>',
      '<style>p{}</style><iframe src="https://e.com"></iframe>',
      '<!-- <script>alert(1)</script> -->',
      '<svg><script>alert(1)</script></svg>',
      '<p onclick="alert(1)">x</p>',
      '<scr<script>ipt>alert(1)</script>',
      '<b>unclosed <i>tags',
      '&lt;script&gt;alert(1)&lt;/script&gt;',
      '<a href="https://e.com" onmouseover="alert(1)">x</a>',
      '<<a>script>alert(1)<</a>/script>',
    ];
    for (const c of cases) {
      const out = sanitizeHtml(c);
      expect(out, c).not.toMatch(/<(script|img|style|iframe|svg)|on[a-z]+=|javascript:|data:/i);
      // Every tag that comes out is an allowed one.
      for (const m of out.matchAll(/<\/?([a-z]+)/g)) expect(['p', 'br', 'a', 'b', 'strong', 'i', 'em', 'u', 'ul', 'ol', 'li', 'blockquote']).toContain(m[1]);
    }
    expect(sanitizeHtml('<b>unclosed <i>tags')).toBe('<b>unclosed <i>tags</i></b>');
    expect(sanitizeHtml('a < b > c & d')).toBe('a &lt; b &gt; c &amp; d');
  });

  it('never lets text hold "]]>" (it goes into CDATA)', () => {
    expect(sanitizeHtml('x]]>y<b>]]></b>')).not.toContain(']]>');
  });
});

describe('htmlToText and looksLikeHtml', () => {
  it('extracts the words, paragraphs as blank lines, references decoded', () => {
    expect(htmlToText('<p>Fish &amp; chips&nbsp;&#8212; <b>now</b></p><script>x()</script><p>Bye</p>')).toBe('Fish & chips — now\n\nBye'); // a no-break space reads as a space
  });
  it('tells HTML from plain text', () => {
    expect(looksLikeHtml('<p>x</p>')).toBe(true);
    expect(looksLikeHtml('Tom &amp; Jerry')).toBe(true);
    expect(looksLikeHtml('3 < 4 and 5 > 2, R&D')).toBe(false);
  });
});
