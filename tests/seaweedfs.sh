#!/bin/sh
# Builds SeaweedFS's `weed` (the S3-compatible object store the archive tests and benchmarks
# start: tests/lbtest/s3.py) into build/peers/weed when it is missing, from the Go module proxy.
# Test and bench only: never shipped. `go install` refuses this module (its go.mod has replace
# directives), so the module is downloaded and built from its copy in the module cache.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
version=v0.0.0-20261109003541-7506e5f91cd6	# the version the Go module proxy serves
out="$top/build/peers/weed"
stamp="$out.version"
if [ -x "$out" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$version" ]; then
	exit 0
fi
[ -x /usr/local/go/bin/go ] && PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || { echo "seaweedfs: go (the Go toolchain) is needed to build weed" >&2; exit 1; }
echo "seaweedfs: building weed $version into build/peers (a few minutes, once)"
mkdir -p "$top/build/peers"
dir=$(go mod download -json "github.com/seaweedfs/seaweedfs@$version" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -n "$dir" ] && [ -d "$dir" ] || { echo "seaweedfs: the module did not download" >&2; exit 1; }
src=$(mktemp -d)
trap 'chmod -R u+w "$src"; rm -rf "$src"' EXIT
cp -R "$dir/." "$src/"
chmod -R u+w "$src"
(cd "$src" && GOFLAGS=-mod=mod go build -trimpath -o "$out.tmp" ./weed)
mv "$out.tmp" "$out"
echo "$version" >"$stamp"
