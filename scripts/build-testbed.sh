#!/usr/bin/env bash
# Builds the test bed's control plane from the Go module proxy and caches the binaries.
#
#   scripts/build-testbed.sh            prints the bin directory as its last stdout line
#
# Components: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kubectl,
# at the versions pinned in testbed/go.mod (the single source of the versions: Kubernetes
# k8s.io/kubernetes with every staging module replaced by the matching v0.N.P, and
# go.etcd.io/etcd/server/v3 for etcd, testbed/etcd/main.go).
#
# Cache: ${LEDGERLET_TESTBED_CACHE:-/var/cache/ledgerlet-testbed}/<key>/bin/ where <key> is
# the first 16 hex digits of the sha256 of testbed/go.mod, testbed/go.sum and
# testbed/etcd/main.go. When every binary is there the script prints the directory at once
# (no Go needed). Otherwise it builds all of them in one go build (-trimpath -ldflags '-s -w',
# CGO_ENABLED=0) into a temporary directory next to the cache entry and renames it into
# place, so a cache entry is complete or absent; concurrent runs wait on a lock. Old entries
# are not removed (delete the cache directory to reclaim them).
#
# Environment: LEDGERLET_TESTBED_CACHE (cache root), GOFLAGS/GOPROXY/GOCACHE as for go.
# Exit status: 0 with the bin directory printed; 1 when Go is missing, the pin is
# inconsistent or a component fails to build (the message names the component).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
testbed="$repo/testbed"
cache_root="${LEDGERLET_TESTBED_CACHE:-/var/cache/ledgerlet-testbed}"
components=(etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)

die() { echo "build-testbed.sh: $*" >&2; exit 1; }

for f in go.mod go.sum etcd/main.go; do
  [ -f "$testbed/$f" ] || die "testbed/$f is missing"
done
key="$(cd "$testbed" && cat go.mod go.sum etcd/main.go | sha256sum | cut -c1-16)"
entry="$cache_root/$key"
bin="$entry/bin"

complete() {
  local c
  for c in "${components[@]}"; do [ -x "$bin/$c" ] || return 1; done
}

build() {
  local tmp="$1" k8s_version etcd_version staging_version bad minor ldflags pkg c pkgs started=$SECONDS
  cd "$testbed"
  k8s_version="$(go list -m -f '{{.Version}}' k8s.io/kubernetes)" ||
    die "go list -m k8s.io/kubernetes failed in testbed/ (see above)"
  etcd_version="$(go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)" ||
    die "go list -m go.etcd.io/etcd/server/v3 failed in testbed/ (see above)"
  # every staging module must be replaced by the tag matching the release (v1.N.P <-> v0.N.P)
  staging_version="v0.${k8s_version#v1.}"
  bad="$(go list -m -f '{{if .Replace}}{{.Path}} {{.Replace.Version}}{{end}}' all |
    awk -v want="$staging_version" '$1 ~ /^k8s\.io\// && $2 != want')" || true
  [ -z "$bad" ] || die "testbed/go.mod: staging modules not at $staging_version for k8s.io/kubernetes $k8s_version: $bad"

  echo "build-testbed.sh: building Kubernetes $k8s_version and etcd $etcd_version into $bin (cold: tens of minutes on 2 cores)" >&2
  minor="${k8s_version#v1.}"; minor="${minor%%.*}"
  ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  # one go build for all of them: its scheduler compiles the shared packages once and links
  # one binary while it compiles the next one's packages (one go build per component left a
  # core idle during each link)
  pkgs=()
  for c in "${components[@]}"; do
    if [ "$c" = etcd ]; then pkgs+=(./etcd); else pkgs+=("k8s.io/kubernetes/cmd/$c"); fi
  done
  echo "build-testbed.sh: go build ${pkgs[*]}" >&2
  CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$tmp/bin/" "${pkgs[@]}" >&2 ||
    die "go build failed (the go output above names the package)"
  for c in "${components[@]}"; do
    [ -x "$tmp/bin/$c" ] || die "go build wrote no $c into $tmp/bin"
  done
  {
    echo "k8s.io/kubernetes $k8s_version"
    echo "go.etcd.io/etcd/server/v3 $etcd_version"
    echo "$(go env GOVERSION) CGO_ENABLED=0"
    echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) in $((SECONDS - started)) s"
  } >"$tmp/versions"
  echo "build-testbed.sh: done in $((SECONDS - started)) s" >&2
}

# shellcheck source=scripts/go-cache.sh
. "$repo/scripts/go-cache.sh"
go_cache_build "$entry" "etcd and Kubernetes (testbed/go.mod)" complete build
echo "$bin"
