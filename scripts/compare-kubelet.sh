#!/usr/bin/env bash
# ledgerlet side by side with the real kubelet: the same workloads on the same machine in one
# run, and the same pod specs' API statuses compared.
#
#   scripts/compare-kubelet.sh [--pods N] [--rounds R] [--steady-s S] [--status-only]
#                              [--keep-cluster] --out FILE.json
#
# It builds ledgerlet (cargo build --release) and the bench (benches/compare_kubelet, cargo
# bench's profile), starts a cluster (scripts/cluster.sh up --runtime containerd
# --kubelet-node kubelet-cmp) whose two nodes are ledgerlet (ledgerlet-cmp, on its defaults)
# and the real kubelet of the pinned release (kubelet-cmp, on its defaults apart from what
# this machine needs: see scripts/cluster-kubelet.sh), each on its own containerd of the same
# package and configuration, runs the bench against it and stops the cluster.
#
# The nodes run side by side rather than one after the other so that every workload
# alternates between them within minutes on the same machine state; they cannot share one
# containerd (the kubelet kills the pods it does not know of in the CRI plugin's one
# namespace), so each has its own, configured alike.
#
# Workloads (each on both nodes, alternately, pods pinned by nodeName): startup of N pods
# (default 30) created at once, container exit → terminated state in the API, deletion with
# grace 1 s, R rounds each (default 3); a burst of 100 pods; 110 pods a node for S seconds
# (default 300) with both agents' CPU and RSS from /proc; then the differential status check
# (every spec of tests/support/differential.rs). FILE.json holds every sample, both agents'
# figures, the ratios kubelet / ledgerlet and every status difference; the table goes to
# standard output and the last line printed is the one-line summary of the ratios.
#
# Exit status: 0 when ledgerlet is no slower than the kubelet on every latency figure (p50
# and p99) and the burst, uses no more CPU or RSS, and every status difference is explained
# in docs/kubelet-differences.md; 1 otherwise or when the run fails. --status-only runs the
# status check alone. --keep-cluster leaves the cluster up (its DIR is printed).
# Needs root (containerd), about 3 GB of memory and 11 to 15 minutes on 2 cores once the
# testbed and cargo caches are built; on a fresh machine the test bed's Go build and the
# release builds run side by side first (see README).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
say() { echo "compare-kubelet.sh: $*" >&2; }
die() { say "$*"; exit 1; }

out="" keep="" bench_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out="${2:?--out FILE.json}"; shift 2 ;;
    --pods|--rounds|--steady-s)
      [[ "${2:-}" =~ ^[1-9][0-9]{0,4}$ ]] || die "$1 wants a positive number"
      bench_args+=("$1" "$2"); shift 2 ;;
    --status-only) bench_args+=(--status-only); shift ;;
    --keep-cluster) keep=1; shift ;;
    -h|--help) sed -n '2,34p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done
[ -n "$out" ] || die "--out FILE.json is required"
[ "$(id -u)" = 0 ] || die "needs root (the nodes' containerd)"
# shellcheck source=scripts/packages.sh
. "$repo/scripts/packages.sh"
# before the builds, not after them: the nodes' containerd and what the cluster needs
need_packages "the nodes' containerd" "${CONTAINERD_WANTS[@]}" || die "see above"
need_packages "scripts/cluster.sh" "${CLUSTER_WANTS[@]}" || die "see above"
out="$(realpath -m -- "$out")"
mkdir -p "$(dirname "$out")"

# The test bed (Go) builds beside ledgerlet (cargo): on a fresh machine each leaves a core
# idle for minutes (module downloads, links, the one large crate), so together they take
# less time than one after the other. A cached test bed is there at once.
testbed_log="$(mktemp /tmp/ledgerlet-compare-testbed.XXXXXX.log)"
say "building the test bed (scripts/build-testbed.sh, log: $testbed_log) beside ledgerlet"
# in a process group of its own, so that stopping it stops its `go build` too
setsid --wait "$repo/scripts/build-testbed.sh" >"$testbed_log" 2>&1 &
testbed_pid=$!
# shellcheck disable=SC2064 # the pid is fixed now
trap "kill -- -$testbed_pid 2>/dev/null || true" EXIT
# executable NAME CARGO_ARGS...: builds with cargo (its output to standard error) and prints
# the path of target NAME's executable, wherever the target directory is
executable() {
  local name="$1"
  shift
  (cd "$repo" && cargo "$@" --message-format=json-render-diagnostics) |
    python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == sys.argv[1] and m.get("executable"):
        print(m["executable"])' "$name" | tail -n 1
}
say "building ledgerlet and the bench (release profiles)"
ledgerlet_bin="$(executable ledgerlet build --release --bin ledgerlet)" || die "cargo build --release failed"
[ -x "$ledgerlet_bin" ] || die "cannot find ledgerlet's executable"
bench_bin="$(executable compare_kubelet bench --bench compare_kubelet --no-run)" ||
  die "building the bench failed"
[ -x "$bench_bin" ] || die "cannot find the bench's executable"

if ! wait "$testbed_pid"; then
  tail -n 30 "$testbed_log" >&2
  die "building the test bed failed (the log above, in full: $testbed_log)"
fi
trap - EXIT
rm -f "$testbed_log"

dir="$(mktemp -d /tmp/ledgerlet-compare-cluster.XXXXXX)"
down() { "$repo/scripts/cluster.sh" down "$dir" >&2 || true; }
[ -n "$keep" ] || trap down EXIT
say "starting the cluster in $dir"
LEDGERLET_BIN="$ledgerlet_bin" \
  "$repo/scripts/cluster.sh" up "$dir" --runtime containerd --node-name ledgerlet-cmp \
  --kubelet-node kubelet-cmp >&2 || die "the cluster did not come up (see $dir/logs/)"

set +e
"$bench_bin" --bench --cluster "$dir" --out "$out" "${bench_args[@]}"
code=$?
set -e
[ -s "$out" ] || die "the bench wrote no report (exit $code)"
if [ -z "$keep" ]; then
  down
  trap - EXIT
else
  say "the cluster stays up: $dir (scripts/cluster.sh down $dir)"
fi
# the summary is the last line printed
python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["summary"])' "$out"
exit "$code"
