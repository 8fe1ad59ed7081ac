#!/usr/bin/env bash
# Builds metrics-server (sigs.k8s.io/metrics-server) from the Go module proxy and caches it.
#
#   scripts/build-metrics-server.sh     prints the binary's path as its last stdout line
#
# The version is pinned in testbed/metrics-server/go.mod (a `tool` directive for
# sigs.k8s.io/metrics-server/cmd/metrics-server; a module of its own because its Kubernetes
# dependencies need not match the pins in testbed/go.mod). `scripts/cluster.sh up DIR
# --with-metrics-server` runs it as the cluster's v1beta1.metrics.k8s.io APIService.
#
# Cache: ${LEDGERLET_TESTBED_CACHE:-/var/cache/ledgerlet-testbed}/metrics-server-<key>/bin/
# metrics-server where <key> is the first 16 hex digits of the sha256 of
# testbed/metrics-server/go.mod and go.sum. When the binary is there the script prints its
# path at once (no Go needed). Otherwise it builds it (go build -trimpath -ldflags '-s -w',
# CGO_ENABLED=0) into a temporary directory next to the cache entry and renames it into
# place, so a cache entry is complete or absent; concurrent runs wait on a lock. Old entries
# are not removed.
#
# Environment: LEDGERLET_TESTBED_CACHE (cache root), GOFLAGS/GOPROXY/GOCACHE as for go.
# Exit status: 0 with the binary's path printed; 1 when Go is missing or the build fails
# (the message names metrics-server and its version).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
module="$repo/testbed/metrics-server"
cache_root="${LEDGERLET_TESTBED_CACHE:-/var/cache/ledgerlet-testbed}"
pkg=sigs.k8s.io/metrics-server/cmd/metrics-server

die() { echo "build-metrics-server.sh: $*" >&2; exit 1; }

for f in go.mod go.sum; do
  [ -f "$module/$f" ] || die "testbed/metrics-server/$f is missing"
done
key="$(cd "$module" && cat go.mod go.sum | sha256sum | cut -c1-16)"
entry="$cache_root/metrics-server-$key"
bin="$entry/bin/metrics-server"

complete() { [ -x "$bin" ]; }

build() {
  local tmp="$1" version started=$SECONDS
  cd "$module"
  version="$(go list -m -f '{{.Version}}' sigs.k8s.io/metrics-server)" ||
    die "go list -m sigs.k8s.io/metrics-server failed in testbed/metrics-server/ (see above)"
  echo "build-metrics-server.sh: building metrics-server $version into $entry (cold: minutes on 2 cores)" >&2
  CGO_ENABLED=0 go build -trimpath \
    -ldflags "-s -w -X sigs.k8s.io/metrics-server/pkg/version.gitVersion=$version" \
    -o "$tmp/bin/metrics-server" "$pkg" >&2 ||
    die "building metrics-server $version ($pkg) failed (see the go output above)"
  {
    echo "sigs.k8s.io/metrics-server $version"
    echo "$(go env GOVERSION) CGO_ENABLED=0"
    echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) in $((SECONDS - started)) s"
  } >"$tmp/versions"
  echo "build-metrics-server.sh: metrics-server $version built in $((SECONDS - started)) s" >&2
}

# shellcheck source=scripts/go-cache.sh
. "$repo/scripts/go-cache.sh"
go_cache_build "$entry" "metrics-server (testbed/metrics-server/go.mod)" complete build
echo "$bin"
