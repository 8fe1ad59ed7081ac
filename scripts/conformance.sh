#!/usr/bin/env bash
# Runs the upstream Kubernetes e2e conformance tests of the test bed's release against a
# cluster whose node is ledgerlet (or, for the reference figure, the real kubelet of the same
# release), and summarises them.
#
#   scripts/conformance.sh [--node ledgerlet|kubelet | --kubeconfig FILE [--containerd-socket PATH]]
#                          [--focus RE] [--skip RE] [--procs N] [--update-docs] [--rerender]
#                          --report DIR
#
# --node kubelet runs the same suite on a fresh cluster whose only node is the real kubelet
# (`cluster.sh up --no-node --kubelet-node`, its containerd configured as ledgerlet's); with
# --update-docs its summary becomes docs/conformance-reference.json, the reference that
# docs/conformance.md compares ledgerlet's results with (a test the kubelet passes and
# ledgerlet fails is marked, and needs a cause in docs/conformance-causes.tsv).
# --rerender writes DIR's summaries again from its report.json (e.g. after a new reference)
# without running anything.
#
# Without --kubeconfig it starts a fresh cluster (`scripts/cluster.sh up DIR/cluster
# --runtime containerd`, the node on the host's address so the API server reaches its
# kubelet API), imports the e2e images into its containerd, runs the tests and tears the
# cluster down. With --kubeconfig it runs against that cluster; its nodes must have the
# images (scripts/build-e2e-images.sh; --containerd-socket imports them into one).
#
# The suite is e2e.test (scripts/build-e2e.sh) with --provider=skeleton, run by ginkgo with
# --procs processes (4: the tests mostly wait). DIR gets junit.xml and report.json (ginkgo's
# reports), e2e.log (the suite's output), summary.json ({"passed", "failed", "skipped",
# "failures": [{"name", "message"}]}: every test in the focus, the skipped ones being those
# the skip patterns or the tests themselves skipped) and conformance.md: the figures, each
# failure with its first message line and, from docs/conformance-causes.tsv (a test-name
# pattern, the cause, what would fix it), its cause, then every test's result.
# --update-docs copies it to docs/conformance.md (do it after a run of the default focus).
# The last line printed is `N passed, M failed, K skipped`.
#
# Exit status: 0 when the suite ran (whatever the tests did: read the summary); 1 when it
# could not run (a build, the cluster, the images).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
die() { echo "conformance.sh: $*" >&2; exit 1; }
say() { echo "conformance.sh: $*" >&2; }

# Every [NodeConformance] and [Conformance] test of sig-node and sig-storage.
focus='(\[sig-node\]|\[sig-storage\]).*(\[NodeConformance\]|\[Conformance\])'
# Skipped, each for its reason:
skip_patterns=(
  '\[Serial\]'        # needs the whole cluster to itself; this run is parallel
  '\[Slow\]'          # longer than the time a run is given (upstream's own split)
  '\[Disruptive\]'    # restarts or breaks components the other tests rely on
  '\[Flaky\]'         # upstream marks it unreliable on any node
  '\[Feature:'        # needs an optional feature or a feature gate that is off by default
  '\[Alpha\]'         # needs an alpha feature gate
  'should be able to pull image'  # pulls from registry.k8s.io: needs the internet
)
skip="$(IFS='|'; echo "${skip_patterns[*]}")"
kubeconfig="" socket="" report="" procs=4 update_docs="" node=ledgerlet rerender=""
command_line="scripts/conformance.sh $*"

while [ $# -gt 0 ]; do
  case "$1" in
    --kubeconfig) kubeconfig="${2:?--kubeconfig FILE}"; shift 2 ;;
    --containerd-socket) socket="${2:?--containerd-socket PATH}"; shift 2 ;;
    --focus) focus="${2:?--focus RE}"; shift 2 ;;
    --skip) skip="${2:?--skip RE}"; shift 2 ;;
    --procs) procs="${2:?--procs N}"; shift 2 ;;
    --report) report="${2:?--report DIR}"; shift 2 ;;
    --update-docs) update_docs=1; shift ;;
    --node) node="${2:?--node ledgerlet|kubelet}"; shift 2 ;;
    --rerender) rerender=1; shift ;;
    -h|--help) sed -n '2,33p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done
[ -n "$report" ] || die "--report DIR is required"
[[ "$procs" =~ ^[1-9][0-9]?$ ]] || die "--procs wants 1 to 99, not $procs"
case "$node" in ledgerlet|kubelet) ;; *) die "--node must be ledgerlet or kubelet, not $node" ;; esac
[ "$node" = ledgerlet ] || [ -z "$kubeconfig" ] || die "--node kubelet starts its own cluster: no --kubeconfig"
mkdir -p "$report"
report="$(cd "$report" && pwd)"

bin="$("$repo/scripts/build-e2e.sh" | tail -n 1)" || die "building the e2e suite failed (see above)"
images="$report/images"
[ -n "$rerender" ] ||
  "$repo/scripts/build-e2e-images.sh" "$images" "$bin" || die "building the e2e images failed (see above)"

import_images() {
  local sock="$1" f
  for f in "$images"/*.oci.tar; do
    ctr --address "$sock" -n k8s.io images import --snapshotter native "$f" >/dev/null ||
      die "ctr images import $f into $sock failed"
  done
  say "imported $(ls "$images"/*.oci.tar | wc -l) e2e images into $sock"
}

cluster=""
if [ -n "$rerender" ]; then
  [ -f "$report/report.json" ] || die "--rerender: $report has no report.json"
elif [ -z "$kubeconfig" ]; then
  cluster="$report/cluster"
  "$repo/scripts/cluster.sh" down "$cluster" >/dev/null 2>&1 || true
  rm -rf "$cluster"
  trap '"$repo/scripts/cluster.sh" down "$cluster" >&2 || true' EXIT
  # the kubelet's port: some tests reach the node through nodes/NAME:10250/proxy
  api_port=()
  [ -n "$(ss -Htln '( sport = :10250 )' 2>/dev/null)" ] || api_port=(--node-api-port 10250)
  if [ "$node" = kubelet ]; then
    kubelet_port=()
    [ -z "${api_port[*]}" ] || kubelet_port=(--kubelet-api-port 10250)
    "$repo/scripts/cluster.sh" up "$cluster" --runtime containerd --no-node \
      --kubelet-node conformance-0 "${kubelet_port[@]}" >&2 ||
      die "the cluster did not come up (see above and $cluster/logs/)"
    socket="$(sed -n 's|^KUBELET_RUNTIME_ENDPOINT=unix://||p' "$cluster/cluster.env")"
  else
    "$repo/scripts/cluster.sh" up "$cluster" --runtime containerd --node-name conformance-0 \
      "${api_port[@]}" >&2 ||
      die "the cluster did not come up (see above and $cluster/logs/)"
    socket="$(sed 's|^unix://||' "$cluster/runtime-endpoint")"
  fi
  kubeconfig="$cluster/admin.kubeconfig"
fi
[ -z "$socket" ] || import_images "$socket"

if [ -z "$rerender" ]; then
  say "running the e2e suite on $node ($procs processes): focus $focus, skip $skip"
  started=$SECONDS
  set +e
  "$bin/ginkgo" --procs "$procs" --no-color --timeout 3h \
    --output-dir "$report" --junit-report junit.xml --json-report report.json \
    --focus "$focus" --skip "$skip" \
    "$bin/e2e.test" -- --provider=skeleton --kubeconfig="$kubeconfig" \
    --report-dir="$report" --e2e-output-dir="$report" >"$report/e2e.log" 2>&1
  code=$?
  set -e
  say "the suite ended with status $code after $((SECONDS - started)) s (output: $report/e2e.log)"
  [ -f "$report/report.json" ] || die "the suite wrote no report.json (see $report/e2e.log)"
  echo "$node" >"$report/node"
fi
node="$(cat "$report/node" 2>/dev/null || echo "$node")"

python3 - "$report" "$focus" "$skip" "$repo/docs/conformance-causes.tsv" "$command_line" \
  "$(cat "$bin/../versions" 2>/dev/null | head -n 1)" "$node" "$repo/docs/conformance-reference.json" <<'PY'
import datetime, json, os, re, sys
report, focus, skip, causes_file, command, version, node, reference_file = sys.argv[1:9]
reference = None
if node == "ledgerlet" and os.path.exists(reference_file):
    reference = json.load(open(reference_file))
causes = []
try:
    for line in open(causes_file):
        if line.strip() and not line.startswith("#"):
            pattern, cause, fix = (line.rstrip("\n").split("\t") + ["", ""])[:3]
            causes.append((re.compile(pattern), cause, fix))
except FileNotFoundError:
    pass
suites = json.load(open(f"{report}/report.json"))
focus_re = re.compile(focus)
counts = {"passed": 0, "failed": 0, "skipped": 0}
failures, rows = [], []
for suite in suites:
    for s in suite.get("SpecReports") or []:
        if s.get("LeafNodeType") != "It":
            continue
        name = " ".join((s.get("ContainerHierarchyTexts") or []) + [s.get("LeafNodeText", "")])
        labels = " ".join(f"[{l}]" for l in (s.get("LeafNodeLabels") or []))
        if not focus_re.search(name) and not focus_re.search(f"{name} {labels}"):
            continue
        state = s.get("State", "")
        if state == "passed":
            counts["passed"] += 1
        elif state in ("skipped", "pending"):
            counts["skipped"] += 1
        else:
            counts["failed"] += 1
            message = (s.get("Failure") or {}).get("Message", state)
            first = "\n".join(message.strip().splitlines()[:5])
            failures.append({"name": name, "state": state, "message": first})
        rows.append((name, "passed" if state == "passed" else
                     "skipped" if state in ("skipped", "pending") else "failed"))
summary = dict(counts, failures=failures, node=node, date=datetime.date.today().isoformat(),
               version=version, command=command, results=dict(sorted(rows)))
json.dump(summary, open(f"{report}/summary.json", "w"), indent=2)
ref_results = (reference or {}).get("results", {})
# the tests the kubelet passes and ledgerlet does not
regressions = [n for n, r in rows if r == "failed" and ref_results.get(n) == "passed"]
def cell(text):
    return text.replace("|", "&#124;").replace("\n", " ")
with open(f"{report}/conformance.md", "w") as md:
    total = sum(counts.values())
    ran = counts["passed"] + counts["failed"]
    share = 100.0 * counts["passed"] / ran if ran else 0.0
    md.write(f"# Upstream conformance on a {'ledgerlet' if node == 'ledgerlet' else 'kubelet (reference)'} node\n\n")
    md.write("Generated by `scripts/conformance.sh --update-docs` from its last full run; do not edit by hand "
             "(causes come from `docs/conformance-causes.tsv`).\n\n")
    md.write(f"**{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped** of the {total} "
             f"tests in the focus: {share:.1f} % of those that ran passed.\n\n")
    md.write(f"- Run: {datetime.date.today().isoformat()}, `{command}`, {version or 'the pinned release'}, "
             "ledgerlet on containerd, one node, 2 cores.\n")
    md.write(f"- Focus: `{focus}`\n- Skip: `{skip}` (each pattern's reason is in the script)\n")
    if reference:
        rran = reference["passed"] + reference["failed"]
        rshare = 100.0 * reference["passed"] / rran if rran else 0.0
        md.write(f"- Reference: the real kubelet of the same release on the same machine and containerd "
                 f"(`scripts/conformance.sh --node kubelet`, {reference.get('date', '?')}): "
                 f"**{reference['passed']} passed, {reference['failed']} failed, {reference['skipped']} skipped** "
                 f"({rshare:.1f} %). Tests the kubelet passes and ledgerlet fails: "
                 f"**{len(regressions)}**{' (marked below)' if regressions else ''}.\n")
    md.write("\n")
    md.write("## Failures\n\n")
    if not failures:
        md.write("None.\n\n")
    else:
        md.write("| Test | First line of the failure | Cause | What would fix it | The kubelet |\n|---|---|---|---|---|\n")
        for f in failures:
            cause, fix = "not yet investigated", ""
            for pattern, c, x in causes:
                if pattern.search(f["name"]):
                    cause, fix = c, x
                    break
            first = f["message"].splitlines()[0] if f["message"] else f["state"]
            on_kubelet = ref_results.get(f["name"], "not run") if reference else "no reference run"
            md.write(f"| {cell(f['name'])} | {cell(first)} | {cell(cause)} | {cell(fix)} | {on_kubelet} |\n")
        md.write("\n")
    md.write("## Every test\n\n| Test | Result |\n|---|---|\n")
    for name, result in sorted(rows):
        md.write(f"| {cell(name)} | {result} |\n")
PY
# the cluster goes before the last line, so that the summary is the last thing printed
if [ -n "$cluster" ]; then
  "$repo/scripts/cluster.sh" down "$cluster" >&2 || true
  trap - EXIT
fi
if [ -n "$update_docs" ] && [ "$node" = kubelet ]; then
  cp "$report/summary.json" "$repo/docs/conformance-reference.json"
  say "wrote docs/conformance-reference.json (run --rerender on ledgerlet's last report to compare)"
elif [ -n "$update_docs" ]; then
  cp "$report/conformance.md" "$repo/docs/conformance.md"
  say "wrote docs/conformance.md"
fi
python3 - "$report/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
print(f"{s['passed']} passed, {s['failed']} failed, {s['skipped']} skipped")
PY
