#!/usr/bin/env bash
# Puts the pinned chDB engine (libchdb.so) into engine/lib, without internet
# access beyond the npm registry, and installs what building against it needs.
#
# Idempotent and fast when the engine is already in place: a stamp file records
# which package was unpacked, and nothing is fetched while it matches.
set -euo pipefail

PACKAGE="@chdb/lib-linux-x64-gnu"
VERSION="26.7.3-stable.1"
# sha512 of the npm tarball (the registry's `integrity` field, in hex).
TARBALL_SHA512="5cff7b98caa7739b59a4a432c11f0dedc2d3b073624e61ebdf4a42e66ce8de35a6ba48ca9f62016bad1cd81fe059435cb858ce3235a8a2b408082a81563e70a7"

here="$(cd "$(dirname "$0")" && pwd)"
lib_dir="$here/lib"
download_dir="$here/download"
stamp="$lib_dir/.fetched"
want="$PACKAGE@$VERSION"

log() { printf 'engine: %s\n' "$*" >&2; }

install_packages() {
  # Debian packages, installed only when missing (apt-get.sh waits for a
  # lock another install holds). Called in `||` lists too, where `set -e`
  # does not stop the script: a failure stops it here, before any build.
  log "installing $*"
  "$here/apt-get.sh" update -qq && "$here/apt-get.sh" install -y -qq "$@" >/dev/null || {
    log "could not install $* (needed to build against the engine): setup stopped"
    exit 1
  }
}

# bindgen (run by chdb-rust's build script) needs libclang.
if ! ldconfig -p | grep -qE 'libclang(-[0-9.]+)?\.so'; then
  install_packages libclang-dev
fi
command -v npm >/dev/null || install_packages npm

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -s "$lib_dir/libchdb.so" ]; then
  exit 0
fi

case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) ;;
  *) log "the pinned engine package is built for Linux x86_64 only (this is $(uname -s)-$(uname -m))"; exit 1 ;;
esac

rm -rf "$download_dir"
mkdir -p "$download_dir" "$lib_dir"
log "fetching $want from the npm registry"
(cd "$download_dir" && npm pack --silent "$want" >/dev/null)
tarball="$(ls "$download_dir"/*.tgz)"

actual="$(sha512sum "$tarball" | cut -d' ' -f1)"
if [ "$actual" != "$TARBALL_SHA512" ]; then
  log "integrity check failed for $tarball"
  log "  expected sha512 $TARBALL_SHA512"
  log "  got             $actual"
  exit 1
fi

tar -xzf "$tarball" -C "$download_dir" package/libchdb.so
mv "$download_dir/package/libchdb.so" "$lib_dir/libchdb.so.partial"
mv "$lib_dir/libchdb.so.partial" "$lib_dir/libchdb.so"
rm -rf "$download_dir"
printf '%s' "$want" > "$stamp"
log "libchdb.so ready in $lib_dir"
