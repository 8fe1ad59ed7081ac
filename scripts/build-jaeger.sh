#!/usr/bin/env bash
# Builds Jaeger (the all-in-one `jaeger` binary, v2) from the Go module proxy and caches it.
#
#   scripts/build-jaeger.sh             prints the binary's path as its last stdout line
#
# The version is pinned in testbed/jaeger/go.mod (a `tool` directive for
# github.com/jaegertracing/jaeger/cmd/jaeger; a module of its own because Jaeger's
# dependencies conflict with the Kubernetes pins in testbed/go.mod). tests/jaeger.rs sends
# the agent's traces to it and reads them back from its query API.
#
# Cache: ${LEDGERLET_TESTBED_CACHE:-/var/cache/ledgerlet-testbed}/jaeger-<key>/bin/jaeger
# where <key> is the first 16 hex digits of the sha256 of testbed/jaeger/go.mod and
# testbed/jaeger/go.sum. When the binary is there the script prints its path at once (no Go
# needed). Otherwise it builds it (go build -trimpath -ldflags '-s -w', CGO_ENABLED=0) into a
# temporary directory next to the cache entry and renames it into place, so a cache entry is
# complete or absent; concurrent runs wait on a lock. Old entries are not removed.
#
# Environment: LEDGERLET_TESTBED_CACHE (cache root), GOFLAGS/GOPROXY/GOCACHE as for go.
# Exit status: 0 with the binary's path printed; 1 when Go is missing or the build fails
# (the message names Jaeger and its version).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
module="$repo/testbed/jaeger"
cache_root="${LEDGERLET_TESTBED_CACHE:-/var/cache/ledgerlet-testbed}"
pkg=github.com/jaegertracing/jaeger/cmd/jaeger

die() { echo "build-jaeger.sh: $*" >&2; exit 1; }

for f in go.mod go.sum; do
  [ -f "$module/$f" ] || die "testbed/jaeger/$f is missing"
done
key="$(cd "$module" && cat go.mod go.sum | sha256sum | cut -c1-16)"
entry="$cache_root/jaeger-$key"
bin="$entry/bin/jaeger"

complete() { [ -x "$bin" ]; }

build() {
  local tmp="$1" version started=$SECONDS
  cd "$module"
  version="$(go list -m -f '{{.Version}}' github.com/jaegertracing/jaeger)" ||
    die "go list -m github.com/jaegertracing/jaeger failed in testbed/jaeger/ (see above)"
  echo "build-jaeger.sh: building Jaeger $version into $entry (cold: tens of minutes on 2 cores)" >&2
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/bin/jaeger" "$pkg" >&2 ||
    die "building Jaeger $version ($pkg) failed (see the go output above)"
  {
    echo "github.com/jaegertracing/jaeger $version"
    echo "$(go env GOVERSION) CGO_ENABLED=0"
    echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) in $((SECONDS - started)) s"
  } >"$tmp/versions"
  echo "build-jaeger.sh: Jaeger $version built in $((SECONDS - started)) s" >&2
}

# shellcheck source=scripts/go-cache.sh
. "$repo/scripts/go-cache.sh"
go_cache_build "$entry" "Jaeger (testbed/jaeger/go.mod)" complete build
echo "$bin"
