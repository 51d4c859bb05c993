// Function spans in C++ sources for the function-length check (scripts/function-length.mjs): every
// function, method, constructor and lambda body in a .cc/.h file, from the first line of its
// declaration to its closing brace. A small scanner, not a parser: comments, string and character
// literals (raw strings too) and preprocessor lines are blanked first (newlines kept), then each `{`
// whose header ends in a parameter list (`)`, optionally followed by qualifiers, a trailing return
// type or a constructor's initialiser list) or in a lambda's capture list opens a function body;
// `if`/`for`/`while`/`switch`/`catch` headers do not.

const CONTROL = new Set(['if', 'for', 'while', 'switch', 'catch', 'return', 'sizeof', 'decltype', 'alignof', 'noexcept', 'static_assert']);

/** `text` with comments, literals and preprocessor lines replaced by spaces (newlines kept). */
export function blankCpp(text) {
  const out = text.split('');
  const blank = (from, to) => {
    for (let i = from; i < to; i++) if (out[i] !== '\n') out[i] = ' ';
  };
  let i = 0;
  let lineStart = true;
  while (i < text.length) {
    const c = text[i];
    if (lineStart && /[ \t]/.test(c)) { i++; continue; }
    if (lineStart && c === '#') {
      let j = i;
      while (j < text.length && !(text[j] === '\n' && text[j - 1] !== '\\')) j++;
      blank(i, j);
      i = j;
      continue;
    }
    lineStart = c === '\n';
    if (c === '/' && text[i + 1] === '/') {
      const j = text.indexOf('\n', i);
      const end = j < 0 ? text.length : j;
      blank(i, end);
      i = end;
    } else if (c === '/' && text[i + 1] === '*') {
      const j = text.indexOf('*/', i + 2);
      const end = j < 0 ? text.length : j + 2;
      blank(i, end);
      i = end;
    } else if (c === '"' && /R$/.test(text.slice(Math.max(0, i - 3), i)) && /(^|[^\w])(u8|u|U|L)?R$/.test(text.slice(Math.max(0, i - 4), i))) {
      const open = text.indexOf('(', i);
      const delim = text.slice(i + 1, open);
      const j = text.indexOf(`)${delim}"`, open);
      const end = j < 0 ? text.length : j + delim.length + 2;
      blank(i, end);
      i = end;
    } else if (c === '"' || (c === "'" && !isDigitSeparator(text, i))) {
      let j = i + 1;
      while (j < text.length && text[j] !== c && text[j] !== '\n') j += text[j] === '\\' ? 2 : 1;
      blank(i + 1, j);
      i = j + 1;
    } else i++;
  }
  return out.join('');
}

/** Whether the `'` at `i` separates digits (C++14 `1'000'000`) rather than opening a literal. */
function isDigitSeparator(text, i) {
  let j = i - 1;
  while (j >= 0 && /[\w.']/.test(text[j])) j--;
  return /[0-9]/.test(text[j + 1] ?? '') && j + 1 < i;
}

/**
 * Every function body in `text`: `{ line, lines, name }` (line 1-based, `lines` from the first line
 * of the declaration to the closing brace inclusive).
 */
export function cppFunctions(text) {
  const src = blankCpp(text);
  const match = new Map();
  const stack = [];
  for (let i = 0; i < src.length; i++) {
    if (src[i] === '{' || src[i] === '(' || src[i] === '[') stack.push(i);
    else if (src[i] === '}' || src[i] === ')' || src[i] === ']') {
      const open = stack.pop();
      if (open !== undefined) match.set(i, open);
    }
  }
  const lineAt = lineIndex(src);
  const found = [];
  for (const [close, open] of match) {
    if (src[open] !== '{') continue;
    const head = header(src, open, match);
    if (!head) continue;
    found.push({ line: lineAt(head.start), lines: lineAt(close) - lineAt(head.start) + 1, name: head.name });
  }
  return found;
}

/** The declaration before the `{` at `open` when it opens a function body: its start and name. */
function header(src, open, match) {
  let j = skipBack(src, open - 1);
  // Qualifiers and a trailing return type after the parameter list.
  for (;;) {
    const m = /(const|noexcept|override|final|mutable|&&|&)$/.exec(src.slice(Math.max(0, j - 9), j + 1));
    if (m) { j = skipBack(src, j - m[0].length); continue; }
    const arrow = /->\s*[\w:<>,\s*&]+$/.exec(src.slice(Math.max(0, j - 120), j + 1));
    if (arrow && src[j] !== ')') { j = skipBack(src, j - arrow[0].length); continue; }
    break;
  }
  if (src[j] === ']') {
    const at = match.get(j);
    return at === undefined ? null : { start: statementStart(src, at, match), name: '(lambda)' };
  }
  if (src[j] !== ')') return null;
  const paren = match.get(j);
  if (paren === undefined) return null;
  const before = skipBack(src, paren - 1);
  if (src[before] === ']') return { start: statementStart(src, match.get(before) ?? before, match), name: '(lambda)' };
  const word = /[\w:~]+$/.exec(src.slice(Math.max(0, before - 200), before + 1))?.[0] ?? '';
  if (!word || CONTROL.has(word)) return null;
  return { start: statementStart(src, paren, match), name: functionName(src, paren, match, word) };
}

/** The function's own name: for a constructor's initialiser list, the name before its `:`. */
function functionName(src, paren, match, word) {
  const start = statementStart(src, paren, match);
  const decl = src.slice(start, paren);
  const m = /([\w:~]+)\s*\([^()]*(\([^()]*\)[^()]*)*\)\s*(const\s*)?(noexcept\s*)?:(?!:)/.exec(decl);
  return m ? m[1] : word;
}

function skipBack(src, j) {
  while (j >= 0 && /\s/.test(src[j])) j--;
  return j;
}

/** Where the statement or declaration holding `at` begins: after the last `;`, `{` or `}` before it, skipping brace initialisers. */
function statementStart(src, at, match) {
  const opens = new Map();
  for (const [c, o] of match) opens.set(c, o);
  let j = at - 1;
  while (j >= 0) {
    const c = src[j];
    if (c === ')' || c === ']') { j = (opens.get(j) ?? j) - 1; continue; }
    if (c === '}') {
      const o = opens.get(j);
      // `member_{value}` in an initialiser list or `Type{...}` in an argument: part of this header.
      if (o !== undefined && isBraceInit(src, o, j)) { j = o - 1; continue; }
      break;
    }
    if (c === ';' || c === '{') break;
    j--;
  }
  j++;
  while (j < at && /\s/.test(src[j])) j++;
  return j;
}

/** Whether `{…}` at `open`..`close` is a brace initialiser (`name{…}`, `Type<…>{…}`): no `;` inside, a name before. */
function isBraceInit(src, open, close) {
  const before = /([\w>]+)\s*$/.exec(src.slice(Math.max(0, open - 40), open))?.[1];
  if (!before || /^(const|noexcept|override|final|mutable|else|do|try|namespace)$/.test(before)) return false;
  return !src.slice(open, close).includes(';');
}

function lineIndex(src) {
  const starts = [0];
  for (let i = 0; i < src.length; i++) if (src[i] === '\n') starts.push(i + 1);
  return (pos) => {
    let lo = 0;
    let hi = starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (starts[mid] <= pos) lo = mid;
      else hi = mid - 1;
    }
    return lo + 1;
  };
}
