/**
 * ICY title escaping (src/delivery/progressive/icy.ts, docs/icecast.md "ICY metadata"): a title's quotes are
 * escaped `\'`, so no title can add a key to the metadata block — read back here with the parser
 * FFmpeg (and so mpv) uses: `key='value';` pairs, the value ending at the first `';`.
 */
import { describe, expect, it } from 'vitest';
import { icyEscape, icyTitleBlock } from '../../../../src/delivery/progressive/icy.js';

/** The text of a block (length byte × 16 bytes, NUL padding dropped). */
function blockText(b: Buffer): string {
  expect(b.length).toBe(1 + b[0]! * 16);
  return b.subarray(1).toString('utf8').replace(/\0+$/, '');
}

/** FFmpeg's `http.c` reading of ICY metadata: every `key='value';` pair, in order. */
function ffmpegKeys(text: string): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  let next = text;
  for (;;) {
    const val = next.indexOf("='");
    if (val < 0) break;
    const end = next.indexOf("';", val);
    if (end < 0) break;
    out.push([next.slice(0, val), next.slice(val + 2, end)]);
    next = next.slice(end + 2);
  }
  return out;
}

describe('icyTitleBlock escaping', () => {
  it("a title with ' and ; cannot inject a StreamUrl key", () => {
    const evil = "a';StreamUrl='http://evil/";
    const text = blockText(icyTitleBlock(evil));
    expect(text).toBe("StreamTitle='a\\';StreamUrl=\\'http://evil/';");
    const keys = ffmpegKeys(text).map(([k]) => k);
    expect(keys).toEqual(['StreamTitle']);
  });

  it("a plain apostrophe is escaped, other text kept (UTF-8)", () => {
    expect(blockText(icyTitleBlock("O'Brien – Café"))).toBe("StreamTitle='O\\'Brien – Café';");
    expect(blockText(icyTitleBlock('a;b'))).toBe("StreamTitle='a;b';");
    expect(icyEscape("x'\ny")).toBe("x\\' y");
  });

  it('a title of quotes too long for one block is cut without splitting an escape', () => {
    const b = icyTitleBlock("'".repeat(5000));
    expect(b[0]).toBeLessThanOrEqual(255);
    const text = blockText(b);
    expect(text.startsWith("StreamTitle='")).toBe(true);
    expect(text.endsWith("';")).toBe(true);
    const inner = text.slice("StreamTitle='".length, -2);
    expect(inner).toMatch(/^(\\')+$/);
    expect(ffmpegKeys(text).map(([k]) => k)).toEqual(['StreamTitle']);
  });
});
