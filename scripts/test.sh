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

# Probe tests (issue 6): the HTTPS probe test makes a self-signed certificate with openssl.
install_probe_test_tools() {
  command -v openssl >/dev/null 2>&1 && return 0
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    say "installing openssl (HTTPS probe test)"
    apt-get update -qq && apt-get install -y -qq openssl >/dev/null \
      || fail "could not install openssl"
  else
    fail "openssl is missing (the HTTPS probe test needs it); install it or run as root"
  fi
}

command -v cargo >/dev/null 2>&1 || fail "cargo is not installed (see README: Rust stable is required)"
install_probe_test_tools
need_component fmt rustfmt
need_component clippy clippy

# Property tests run at least 1,000 cases each (override with PROPTEST_CASES).
export PROPTEST_CASES="${PROPTEST_CASES:-1000}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
if [ "$ci" = "true" ]; then
  export RUST_BACKTRACE=1
fi

say "cargo fmt --check"
cargo fmt --all -- --check
say "cargo clippy --all-targets -- -D warnings"
cargo clippy --all-targets -- -D warnings
say "cargo test --all-targets"
cargo test --all-targets
say "all tests passed"
