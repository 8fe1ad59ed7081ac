#!/usr/bin/env bash
# Soak check of the node's health: runs the agent on the example pods for MINUTES (default 15)
# with its default PLEG settings, polls /healthz every second and counts every answer that is
# not "200 ok". With --cluster DIR (a `scripts/cluster.sh up DIR` cluster whose node is
# ledgerlet) it polls the node's Ready condition through the API server instead of starting an
# agent of its own, and counts every poll where Ready is not True.
#
#   scripts/soak-healthz.sh [MINUTES] [--cluster DIR]
#
# Prints one line per minute and, last, `soak: N polls, M failed` (exit 1 when M > 0).
# Not part of scripts/test.sh: it is a check a user runs (it takes MINUTES).
set -euo pipefail
cd "$(dirname "$0")/.."

minutes=15
cluster=""
while [ $# -gt 0 ]; do
  case "$1" in
    --cluster) cluster="$2"; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) minutes="$1"; shift ;;
  esac
done

polls=0
failed=0
first_failure=""
check() { # $1: 0 when the poll passed; $2: what was seen
  polls=$((polls + 1))
  if [ "$1" != 0 ]; then
    failed=$((failed + 1))
    [ -n "$first_failure" ] || first_failure="$(date -u +%H:%M:%S) $2"
  fi
}

if [ -n "$cluster" ]; then
  kubectl="$(scripts/build-testbed.sh | tail -n 1)/kubectl --kubeconfig $cluster/admin.kubeconfig"
  node="$(cat "$cluster/node-name")"
  poll() {
    local ready
    ready="$($kubectl get node "$node" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>&1 || true)"
    [ "$ready" = True ]; check $? "Ready=$ready"
  }
else
  cargo build --release --quiet
  root="$(mktemp -d)"
  port=10255
  target/release/ledgerlet run --pod-manifest-path examples/pods --root-dir "$root/state" \
    --pod-logs-dir "$root/logs" --read-only-port "$port" --port 0 >"$root/agent.log" 2>&1 &
  agent=$!
  trap 'kill -TERM $agent 2>/dev/null; wait $agent 2>/dev/null; rm -rf "$root"' EXIT
  for _ in $(seq 1 100); do
    curl -fsS "localhost:$port/healthz" >/dev/null 2>&1 && break
    sleep 0.2
  done
  poll() {
    local body
    body="$(curl -sS -w ' %{http_code}' "localhost:$port/healthz" 2>&1 || true)"
    [ "$body" = "ok 200" ]; check $? "$body"
  }
fi

end=$(( $(date +%s) + minutes * 60 ))
next_report=$(( $(date +%s) + 60 ))
while [ "$(date +%s)" -lt "$end" ]; do
  poll
  if [ "$(date +%s)" -ge "$next_report" ]; then
    echo "$(date -u +%H:%M:%S) $polls polls, $failed failed"
    next_report=$((next_report + 60))
  fi
  sleep 1
done
[ -z "$first_failure" ] || echo "first failure: $first_failure"
echo "soak: $polls polls, $failed failed"
[ "$failed" = 0 ]
