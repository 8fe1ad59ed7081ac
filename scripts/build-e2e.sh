#!/usr/bin/env bash
# Builds the upstream conformance suite of the test bed's Kubernetes release and caches it.
#
#   scripts/build-e2e.sh                prints the bin directory as its last stdout line
#
# bin/ holds e2e.test (go test -c k8s.io/kubernetes/test/e2e), ginkgo (the suite runner),
# agnhost and nnp (k8s.io/kubernetes/test/images/agnhost and .../nonewprivs, the binaries of
# the agnhost and nonewprivs test images) and pause (testbed/e2e/pause, the workload pause
# image's binary), from testbed/e2e/go.mod, whose k8s.io/kubernetes must be the release of
# testbed/go.mod. scripts/build-e2e-images.sh makes the images from them.
#
# Cache: ${LEDGERLET_TESTBED_CACHE:-/var/cache/ledgerlet-testbed}/e2e-<key>/bin/ where <key>
# is the first 16 hex digits of the sha256 of testbed/e2e/go.mod, go.sum and pause/main.go.
# When every binary is there the script prints the directory at once (no Go needed).
# Otherwise it builds them (-trimpath, -ldflags '-s -w', CGO_ENABLED=0) into a temporary
# directory next to the cache entry and renames it into place (about 10 minutes cold on
# 2 cores with the test bed's Go build cache warm); concurrent runs wait on a lock.
#
# Environment: LEDGERLET_TESTBED_CACHE (cache root), GOFLAGS/GOPROXY/GOCACHE as for go.
# Exit status: 0 with the bin directory printed; 1 when Go is missing, the release does not
# match testbed/go.mod, or a build fails (the message names the binary).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
module="$repo/testbed/e2e"
cache_root="${LEDGERLET_TESTBED_CACHE:-/var/cache/ledgerlet-testbed}"
binaries=(e2e.test ginkgo agnhost nnp pause)

die() { echo "build-e2e.sh: $*" >&2; exit 1; }

for f in go.mod go.sum pause/main.go; do
  [ -f "$module/$f" ] || die "testbed/e2e/$f is missing"
done
key="$(cd "$module" && cat go.mod go.sum pause/main.go | sha256sum | cut -c1-16)"
entry="$cache_root/e2e-$key"
bin="$entry/bin"

complete() {
  local b
  for b in "${binaries[@]}"; do [ -x "$bin/$b" ] || return 1; done
}

build() {
  local tmp="$1" version want minor ldflags pkg started=$SECONDS
  cd "$module"
  version="$(go list -m -f '{{.Version}}' k8s.io/kubernetes)" ||
    die "go list -m k8s.io/kubernetes failed in testbed/e2e/ (see above)"
  want="$(cd "$repo/testbed" && go list -m -f '{{.Version}}' k8s.io/kubernetes)" ||
    die "go list -m k8s.io/kubernetes failed in testbed/ (see above)"
  [ "$version" = "$want" ] ||
    die "testbed/e2e/go.mod has k8s.io/kubernetes $version, testbed/go.mod $want: they must match"
  echo "build-e2e.sh: building the e2e suite of Kubernetes $version into $entry (cold: about 10 minutes on 2 cores)" >&2
  minor="${version#v1.}"; minor="${minor%%.*}"
  ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  CGO_ENABLED=0 go test -c -trimpath -ldflags "$ldflags" -o "$tmp/bin/e2e.test" \
    k8s.io/kubernetes/test/e2e >&2 || die "building e2e.test (k8s.io/kubernetes/test/e2e) failed"
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/bin/ginkgo" \
    github.com/onsi/ginkgo/v2/ginkgo >&2 || die "building ginkgo failed"
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/bin/agnhost" \
    k8s.io/kubernetes/test/images/agnhost >&2 || die "building agnhost failed"
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/bin/nnp" \
    k8s.io/kubernetes/test/images/nonewprivs >&2 || die "building nnp (nonewprivs) failed"
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/bin/pause" ./pause >&2 ||
    die "building pause (testbed/e2e/pause) failed"
  {
    echo "k8s.io/kubernetes $version"
    echo "agnhost $(cat "$(go list -m -f '{{.Dir}}' k8s.io/kubernetes)/test/images/agnhost/VERSION")"
    echo "$(go env GOVERSION) CGO_ENABLED=0"
    echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) in $((SECONDS - started)) s"
  } >"$tmp/versions"
  echo "build-e2e.sh: done in $((SECONDS - started)) s" >&2
}

# shellcheck source=scripts/go-cache.sh
. "$repo/scripts/go-cache.sh"
go_cache_build "$entry" "the e2e suite (testbed/e2e/go.mod)" complete build
echo "$bin"
