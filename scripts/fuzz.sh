#!/usr/bin/env bash
# Fuzzes the decoders users and peers can feed ledgerlet, with cargo-fuzz (libFuzzer).
# A local tool, NOT run in CI: it needs the nightly toolchain and minutes of CPU.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET (default 180)] [TARGET...]   (default: every target)
#
# Targets (fuzz/fuzz_targets/):
#   manifest_yaml  sources::file::parse_manifest on a `*.yaml` path (decode, default, validate)
#   manifest_json  the same on a `*.json` path
#   ledger_line    ledger::codec::decode_line and ledger::Reader (with core::Node snapshots)
#
# Each target runs for SECONDS with one libFuzzer job in one worker (-jobs=1 -workers=1:
# the machine is shared), a 2 s per-input timeout (a unit slower than that is a finding:
# hostile input must not stall the agent), a 2 GiB RSS limit, and debug assertions and
# overflow checks on. It starts from the committed seeds (fuzz/seeds/<target>/) and the
# working corpus (fuzz/corpus/<target>/, not committed), mutates with the tokens of
# fuzz/dicts/<target>.dict, and prints per target: runs, the coverage it reached and how
# much it grew, and the crashes, timeouts and OOMs found (fuzz/artifacts/<target>/).
# libFuzzer stops a target at its first finding.
#
# With a finding:
#   cargo +nightly fuzz run   -a <target> fuzz/artifacts/<target>/<file>   # reproduce
#   cargo +nightly fuzz tmin  -a <target> fuzz/artifacts/<target>/<file>   # minimize
# then keep the minimized input in fuzz/regressions/<target>/<short-name> (committed).
# Replay every kept regression (each must pass once fixed) with
#   cargo +nightly fuzz run -a <target> fuzz/regressions/<target>/<file>
#
# Environment: FUZZ_TOOLCHAIN (default nightly); FUZZ_NO_BUILD=1 runs the binaries already
# in fuzz/target (the instrumented build of ledgerlet takes 20+ minutes on a busy machine).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
fuzz="$root/fuzz"
toolchain="${FUZZ_TOOLCHAIN:-nightly}"

secs="${1:-180}"
if ! [[ "$secs" =~ ^[0-9]+$ ]] || [ "$secs" -eq 0 ]; then
    echo "usage: $0 [SECONDS_PER_TARGET] [TARGET...]" >&2
    exit 2
fi
shift $(($# > 0 ? 1 : 0))

if ! cargo "+$toolchain" fuzz --version >/dev/null 2>&1; then
    echo "== installing cargo-fuzz" >&2
    cargo install cargo-fuzz
fi

all_targets=$(cargo "+$toolchain" fuzz list --fuzz-dir "$fuzz")
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets <<<"$all_targets"
fi
for t in "${targets[@]}"; do
    if ! grep -qx "$t" <<<"$all_targets"; then
        echo "unknown target $t (known: $(echo $all_targets))" >&2
        exit 2
    fi
done

if [ -z "${FUZZ_NO_BUILD:-}" ]; then
    echo "== building the fuzz targets (release, debug assertions)" >&2
    cargo "+$toolchain" fuzz build -a --fuzz-dir "$fuzz" >&2
fi
# The binaries are run directly, not by `cargo fuzz run`: that would rebuild the (slow,
# instrumented) ledgerlet crate before each target whenever src/ changed meanwhile.
triple=$(rustc "+$toolchain" -vV | sed -n 's/^host: //p')
bin_dir="$fuzz/target/$triple/release"

summary=()
found_any=0
for t in "${targets[@]}"; do
    case "$t" in
        manifest_*) max_len=262144 ;;
        *) max_len=65536 ;;
    esac
    corpus="$fuzz/corpus/$t"
    seeds="$fuzz/seeds/$t"
    artifacts="$fuzz/artifacts/$t"
    logs="$fuzz/artifacts/logs/$t"
    mkdir -p "$corpus" "$seeds" "$artifacts" "$logs"
    log="$logs/run.log"
    stamp="$logs/.started"
    touch "$stamp"
    rm -f "$logs"/fuzz-*.log
    echo "== $t: ${secs}s (log: ${log#$root/})" >&2
    # -jobs=1 -workers=1 runs the fuzzer in one child process whose output goes to
    # fuzz-0.log in the current directory: run from the log directory.
    status=0
    dict=()
    [ -f "$fuzz/dicts/$t.dict" ] && dict=(-dict="$fuzz/dicts/$t.dict")
    (cd "$logs" && ASAN_OPTIONS="${ASAN_OPTIONS:-detect_odr_violation=0}" "$bin_dir/$t" \
        -artifact_prefix="$artifacts/" -max_total_time="$secs" -rss_limit_mb=2048 -timeout=2 \
        -max_len="$max_len" -jobs=1 -workers=1 -print_final_stats=1 "${dict[@]}" \
        "$corpus" "$seeds") >"$log" 2>&1 || status=$?
    out="$logs/fuzz-0.log"
    [ -f "$out" ] || out="$log"
    runs=$(grep -ao 'stat::number_of_executed_units: *[0-9]*' "$out" | tail -1 | grep -o '[0-9]*$' || true)
    [ -n "$runs" ] || runs=$(grep -aoE '^#[0-9]+' "$out" | tail -1 | tr -d '#' || true)
    new_units=$(grep -ao 'stat::new_units_added: *[0-9]*' "$out" | tail -1 | grep -o '[0-9]*$' || true)
    cov_start=$(grep -a 'INITED' "$out" | grep -ao 'cov: [0-9]*' | head -1 | grep -o '[0-9]*' || true)
    cov_end=$(grep -aE 'cov: [0-9]+' "$out" | tail -1 | grep -ao 'cov: [0-9]*' | grep -o '[0-9]*' || true)
    ft_end=$(grep -aE 'ft: [0-9]+' "$out" | tail -1 | grep -ao 'ft: [0-9]*' | grep -o '[0-9]*' || true)
    corp=$(find "$corpus" -type f | wc -l)
    mapfile -t found < <(find "$artifacts" -maxdepth 1 -type f -newer "$stamp" \
        \( -name 'crash-*' -o -name 'timeout-*' -o -name 'oom-*' -o -name 'leak-*' -o -name 'slow-unit-*' \) |
        sort)
    line="$t: runs ${runs:-?}, coverage ${cov_start:-?} -> ${cov_end:-?} edges (features ${ft_end:-?}), new units ${new_units:-?}, corpus $corp files, exit $status"
    if [ ${#found[@]} -gt 0 ]; then
        found_any=1
        line+=$'\n'"  FOUND ${#found[@]}:"
        for f in "${found[@]}"; do
            what=$(grep -aE '^==[0-9]+== ?ERROR: libFuzzer: [a-z-]+|panicked at|ALARM: working on the last Unit' "$out" |
                head -2 | tr '\n' ' ')
            line+=$'\n'"    ${f#$root/}  ($(stat -c %s "$f") bytes) ${what}"
        done
    elif [ "$status" -ne 0 ]; then
        found_any=1
        line+=$'\n'"  the run failed without an artifact: see ${log#$root/} and ${out#$root/}"
    fi
    summary+=("$line")
    echo "$line" >&2
done

echo
echo "== summary (${secs}s per target)"
printf '%s\n' "${summary[@]}"
exit $found_any
