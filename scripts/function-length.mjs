#!/usr/bin/env node
// The house rule on function length (docs/architecture.md "Functions"): no function, method or
// arrow function in src/, and no C++ function, method or lambda in native/ (native/third_party
// aside; scripts/function-length-cpp.mjs finds them), spans more than MAX lines, counted from its
// first line to its last.
// Prints every offender with its length and exits 1 when there is one. `--list N` prints the N
// longest instead (and exits 0).
import ts from 'typescript';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { cppFunctions } from './function-length-cpp.mjs';

const MAX = 80;
const root = path.resolve(import.meta.dirname, '..', 'src');
const nativeRoot = path.resolve(import.meta.dirname, '..', 'native');
const thirdParty = path.join(nativeRoot, 'third_party');

function* files(dir, ends) {
  for (const name of readdirSync(dir)) {
    const p = path.join(dir, name);
    if (p === thirdParty) continue;
    if (statSync(p).isDirectory()) yield* files(p, ends);
    else if (ends.some((e) => p.endsWith(e))) yield p;
  }
}

function nameOf(node, sf) {
  if (node.name && ts.isIdentifier(node.name)) return node.name.text;
  const parent = node.parent;
  if (parent && ts.isVariableDeclaration(parent) && ts.isIdentifier(parent.name)) return parent.name.text;
  if (parent && ts.isPropertyAssignment(parent) && parent.name && ts.isIdentifier(parent.name)) return parent.name.text;
  if (parent && ts.isCallExpression(parent)) return `(callback of ${parent.expression.getText(sf).slice(0, 40)})`;
  return '(anonymous)';
}

const found = [];
for (const file of files(root, ['.ts'])) {
  const sf = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
  const visit = (node) => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body) {
      const a = sf.getLineAndCharacterOfPosition(node.getStart(sf)).line;
      const b = sf.getLineAndCharacterOfPosition(node.getEnd()).line;
      found.push({ file: path.relative(path.dirname(root), file), line: a + 1, lines: b - a + 1, name: nameOf(node, sf) });
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
}
const tsCount = found.length;
for (const file of files(nativeRoot, ['.cc', '.h'])) {
  for (const f of cppFunctions(readFileSync(file, 'utf8'))) found.push({ ...f, file: path.relative(path.dirname(root), file) });
}
found.sort((x, y) => y.lines - x.lines);
const listAt = process.argv.indexOf('--list');
if (listAt >= 0) {
  for (const f of found.slice(0, Number(process.argv[listAt + 1] ?? 30))) console.log(`${String(f.lines).padStart(4)}  ${f.file}:${f.line}  ${f.name}`);
  process.exit(0);
}
const over = found.filter((f) => f.lines > MAX);
for (const f of over) console.error(`${f.file}:${f.line}: ${f.name} spans ${f.lines} lines (at most ${MAX})`);
if (over.length) process.exit(1);
console.log(`function length: ${tsCount} functions in src/ and ${found.length - tsCount} in native/, none over ${MAX} lines`);
