// Prints the addon's sources for binding.gyp: addon.cc, every binding/*.cc, io/*.cc and core/**/*.cc,
// and the vendored C sources of native/third_party/llhttp (docs/decisions.md "HTTP framing with llhttp").
// Kept as a script so that adding a file under native/ never needs an edit of binding.gyp.
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const root = __dirname;
const out = [];
function walk(dir) {
  for (const e of fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) walk(p);
    else if (e.name.endsWith('.cc')) out.push(path.relative(path.join(root, '..'), p).split(path.sep).join('/'));
  }
}
out.push('native/addon.cc');
walk(path.join(root, 'binding'));
walk(path.join(root, 'io'));
walk(path.join(root, 'core'));
for (const f of ['llhttp.c', 'api.c', 'http.c']) out.push(`native/third_party/llhttp/${f}`);
process.stdout.write(out.join(' '));
