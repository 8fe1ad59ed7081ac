#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit, property, scenario and integration tests.
#
# On a fresh machine this is the only command needed. Tools the tests need are installed
# when missing and running as root; under CI=true a missing tool is a failure, never a skip.
set -euo pipefail
cd "$(dirname "$0")/.."

ci="${CI:-false}"
say() { printf '==> %s\n' "$*" >&2; }
fail() { printf 'scripts/test.sh: %s\n' "$*" >&2; exit 1; }
# shellcheck source=scripts/packages.sh
. scripts/packages.sh

need_component() {
  local sub="$1" component="$2"
  if ! cargo "$sub" --version >/dev/null 2>&1; then
    if command -v rustup >/dev/null 2>&1; then
      say "installing rustup component $component"
      rustup component add "$component" || fail "could not install $component"
    else
      fail "cargo $sub is missing and rustup is not available to install $component"
    fi
  fi
}

# Observability peers: Debian's `prometheus` (promtool and a real Prometheus for the
# scrape and dashboard tests), PyPI's `rotel` (a real OTLP receiver that logs spans) and PyPI's
# `jsonschema` (the offline validator of dashboards/*.json).
install_observability_peers() {
  local root=false
  [ "$(id -u)" = 0 ] && root=true
  need_packages "the scrape and dashboard tests" promtool=prometheus prometheus=prometheus || true
  if ! python3 -c 'import rotel' >/dev/null 2>&1; then
    if $root && command -v python3 >/dev/null 2>&1; then
      say "installing PyPI package rotel (OTLP receiver)"
      python3 -m pip install -q rotel >/dev/null 2>&1 || say "could not install rotel"
    fi
  fi
  if ! python3 -c 'import jsonschema' >/dev/null 2>&1; then
    if $root && command -v python3 >/dev/null 2>&1; then
      say "installing PyPI package jsonschema (dashboard schema validator)"
      python3 -m pip install -q jsonschema >/dev/null 2>&1 || say "could not install jsonschema"
    fi
  fi
  if [ "$ci" = "true" ]; then
    python3 -c 'import jsonschema' >/dev/null 2>&1 || fail "jsonschema is missing (PyPI package jsonschema)"
    command -v promtool >/dev/null 2>&1 || fail "promtool is missing (Debian package prometheus)"
    command -v prometheus >/dev/null 2>&1 || fail "prometheus is missing (Debian package prometheus)"
    python3 -c 'import rotel' >/dev/null 2>&1 || fail "rotel is missing (PyPI package rotel)"
  fi
}

# Probe tests: the HTTPS probe test makes a self-signed certificate with openssl.
install_probe_test_tools() {
  need_packages "the HTTPS probe test" openssl=openssl || fail "see above"
}

command -v cargo >/dev/null 2>&1 || fail "cargo is not installed (see README: Rust stable is required)"
install_probe_test_tools
need_component fmt rustfmt
need_component clippy clippy

# containerd, runc, the CNI plugins and busybox-static for the containerd tests (a private
# containerd started by the tests or by scripts/cluster.sh; images built offline by
# scripts/build-test-images.sh). Installed as root when missing; under CI=true a missing one
# is a failure (the tests fail too), else they skip.
need_containerd() {
  need_packages "the containerd tests" "${CONTAINERD_WANTS[@]}" && return 0
  [ "$ci" = "true" ] && fail "the containerd tests cannot run (see above)"
  say "the containerd tests will be skipped"
}
need_containerd

# The real control plane of tests/real_cluster.rs (etcd, kube-apiserver, controller-manager,
# scheduler of the release pinned in testbed/go.mod), built from the Go module proxy into a
# cache that later runs reuse (scripts/build-testbed.sh; a cold build takes about 17 minutes
# on 2 cores). Go is needed only for a cold build; under CI=true a missing Go or a failed
# build is a failure, otherwise the real-cluster tests say they were skipped.
need_testbed() {
  need_packages "scripts/cluster.sh" "${CLUSTER_WANTS[@]}" || [ "$ci" != "true" ] ||
    fail "see above"
  say "scripts/build-testbed.sh (the real control plane; cached after the first build)"
  if ! scripts/build-testbed.sh >/dev/null; then
    [ "$ci" = "true" ] && fail "the real control plane could not be built (scripts/build-testbed.sh, see above)"
    say "the real control plane could not be built: the real-cluster tests will be skipped"
  fi
}
need_testbed

# The real Jaeger of tests/tracing.rs (the jaeger v2 binary of the release pinned in
# testbed/jaeger/go.mod), built from the Go module proxy into the same cache
# (scripts/build-jaeger.sh; the tests ask it for the cached binary's path). Like the test
# bed: under CI=true a missing Go or a failed build is a failure, otherwise the Jaeger test
# says it was skipped.
need_jaeger() {
  say "scripts/build-jaeger.sh (a real Jaeger; cached after the first build)"
  if ! scripts/build-jaeger.sh >/dev/null; then
    [ "$ci" = "true" ] && fail "Jaeger could not be built (scripts/build-jaeger.sh, see above)"
    say "Jaeger could not be built: the Jaeger test will be skipped"
  fi
}
need_jaeger

# metrics-server for tests/node_stats.rs (`cluster.sh up --with-metrics-server`, the release
# pinned in testbed/metrics-server/go.mod), built into the same cache by
# scripts/build-metrics-server.sh; cluster.sh would build it on first use, this builds it
# before the tests start (a cold build takes about 5 minutes on 2 cores).
need_metrics_server() {
  say "scripts/build-metrics-server.sh (metrics-server for kubectl top; cached after the first build)"
  if ! scripts/build-metrics-server.sh >/dev/null; then
    [ "$ci" = "true" ] && fail "metrics-server could not be built (scripts/build-metrics-server.sh, see above)"
    say "metrics-server could not be built: the tests/node_stats.rs tests will be skipped"
  fi
}
need_metrics_server

# The upstream conformance suite of tests/conformance_smoke.rs (scripts/conformance.sh):
# e2e.test, ginkgo and the test images' binaries of the pinned release, built into the same
# cache by scripts/build-e2e.sh (about 10 minutes cold on 2 cores), and bash-static for the
# images' shell (scripts/build-e2e-images.sh). Under CI=true a failure is a failure,
# otherwise the smoke test says it was skipped.
need_e2e() {
  need_packages "the e2e test images' shell" /bin/bash-static=bash-static ||
    [ "$ci" != "true" ] || fail "see above"
  say "scripts/build-e2e.sh (the upstream e2e suite; cached after the first build)"
  if ! scripts/build-e2e.sh >/dev/null; then
    [ "$ci" = "true" ] && fail "the e2e suite could not be built (scripts/build-e2e.sh, see above)"
    say "the e2e suite could not be built: the conformance smoke test will be skipped"
  fi
}
need_e2e

# Property tests run at least 1,000 cases each (override with PROPTEST_CASES).
export PROPTEST_CASES="${PROPTEST_CASES:-1000}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
if [ "$ci" = "true" ]; then
  export RUST_BACKTRACE=1
fi

install_observability_peers

say "cargo fmt --check"
cargo fmt --all -- --check
say "cargo clippy --all-targets --features fault-injection -- -D warnings"
cargo clippy --all-targets --features fault-injection -- -D warnings
tests_started="$(mktemp)"
trap 'rm -f "$tests_started"' EXIT
say "cargo test --all-targets --features fault-injection"
cargo test --all-targets --features fault-injection

# The containerd tests stop their containerd and delete its directory (pods, shims, mounts)
# when each test process exits: a directory whose test process is gone is a leak.
for d in "${TMPDIR:-/tmp}"/ledgerlet-containerd-*; do
  [ -d "$d" ] || continue
  owner="$(cat "$d/owner.pid" 2>/dev/null || echo 0)"
  kill -0 "$owner" 2>/dev/null || fail "a test left a containerd behind: $d ($(grep -c " $d" /proc/self/mountinfo) mounts)"
done
# Each test binary's control plane is torn down by its watchdog once the binary exits.
for d in "${TMPDIR:-/tmp}"/ledgerlet-cluster-*; do
  [ -d "$d" ] && [ "$d" -nt "$tests_started" ] || continue
  for _ in $(seq 1 120); do [ -d "$d" ] || break; sleep 1; done
  [ ! -d "$d" ] || fail "a test left a control plane behind: $d (scripts/cluster.sh down $d)"
done
say "all tests passed"
