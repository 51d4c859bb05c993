/**
 * ICY metadata (the SHOUTcast/Icecast in-band title protocol, as Icecast's `format_mp3.c` writes
 * it): a client that sends `Icy-MetaData: 1` gets `icy-metaint: N` and, after every N bytes of
 * the stream, one metadata block — a length byte L, then L × 16 bytes of text padded with NULs:
 * `StreamTitle='<title>';`. L = 0 (one 0x00 byte) says "unchanged".
 */

/** Stream bytes between two metadata blocks (`icy-metaint`). */
export const ICY_METAINT = 16000;

/** The block that says "no change": a zero length byte. */
export const ICY_EMPTY_BLOCK: Buffer = Buffer.from([0]);

/** Largest block text: 255 × 16 bytes. */
const MAX_TEXT = 255 * 16;

/**
 * `title` as the value of `StreamTitle='…'`: control characters become spaces and every `'`
 * becomes `\'` (the escape SHOUTcast-style players read). Every quote that comes from the title
 * then follows a backslash, so `='` — where a player's parser starts the value of a key — never
 * does: a title such as `a';StreamUrl='http://evil/` cannot add a `StreamUrl` key (a naive parser
 * may cut such a title at its `';`, but it reads no other key out of it).
 */
export function icyEscape(title: string): string {
  return title.replace(/[\u0000-\u001f\u007f]/g, ' ').replace(/'/g, "\\'");
}

/**
 * The metadata block for `title` (`StreamTitle='<title>';`, UTF-8, the title escaped by
 * `icyEscape`): a title too long for one block (4080 bytes with the framing) is cut at a
 * character boundary (never inside an escape). `''` clears the title on the player.
 */
export function icyTitleBlock(title: string): Buffer {
  let t = title;
  let text = Buffer.from(`StreamTitle='${icyEscape(t)}';`, 'utf8');
  while (text.length > MAX_TEXT) {
    t = t.slice(0, Math.max(0, t.length - Math.ceil((text.length - MAX_TEXT) / 4) - 1));
    if (/[\ud800-\udbff]$/.test(t)) t = t.slice(0, -1);
    text = Buffer.from(`StreamTitle='${icyEscape(t)}';`, 'utf8');
  }
  const blocks = Math.ceil(text.length / 16);
  const out = Buffer.alloc(1 + blocks * 16);
  out[0] = blocks;
  text.copy(out, 1);
  return out;
}
