#!/bin/sh
# Build BitTorrent's libutp `ucat` (uTP, LEDBAT: the ledbat scheme, schemes/ledbat.yml) from
# the sources npm's utp-native 2.5.3 ships (deps/libutp: ucat.c and its Makefile), checked
# by the tarball's sha256, and install its static build as PREFIX/bin/ucat (default
# /usr/local). Pantheon ran the same program for its LEDBAT. About 5 s here; run by
# install.sh; run again, it rebuilds only when ucat is missing.
#   schemes/install-ucat.sh [PREFIX]
set -eu
PREFIX=${1:-/usr/local}
VERSION=2.5.3
URL=https://registry.npmjs.org/utp-native/-/utp-native-$VERSION.tgz
SHA256=e1a534fdb46784e8f121af45aac3dce30b5328d5e0a82b819b9f4bd02ccb0166
if [ -x "$PREFIX/bin/ucat" ]; then
    exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
curl -fsSL -o "$work/utp.tgz" "$URL"
echo "$SHA256  $work/utp.tgz" | sha256sum -c --quiet -
tar -xzf "$work/utp.tgz" -C "$work"
make -s -C "$work/package/deps/libutp" ucat-static >/dev/null 2>&1
install -D -m 755 "$work/package/deps/libutp/ucat-static" "$PREFIX/bin/ucat"
echo "install-ucat: libutp's ucat (utp-native $VERSION) in $PREFIX/bin/ucat"
