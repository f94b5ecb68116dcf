#!/usr/bin/env bash
# Runs the demo N times from one build and prints a row per run: its exit code, the
# share answered within the SLO, answers late, requests expired, refused and needless
# refusals, and variant switches. Every other run (the first among them) starts as on
# a new machine: the stored profiles (*.profile.json, *.images.json) of the demo's
# variants are removed first, so that it profiles them again. Each run's files go to
# OUT/run-K (the demo's target/demo), with its output; the table to OUT/results.md.
#
#   bash scripts/bench/demo_repeat.sh N [OUT]      (default OUT: bench-demo-repeat; ~1-2 min a run)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
RUNS="${1:?usage: demo_repeat.sh N [OUT]}"
OUT="$(realpath -m "${2:-$ROOT/bench-demo-repeat}")"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/modelless/target}"
MODELS="$ROOT/.modelless/efficientnet"
cd "$ROOT"
log() { echo "demo_repeat: $*" >&2; }

bash scripts/setup/demo.sh
log "building the demo once"
cargo build --quiet --release --locked -p modelless-lab --example demo
rm -rf "$OUT" && mkdir -p "$OUT/bin"
cp "$CARGO_TARGET_DIR/release/examples/demo" "$OUT/bin/demo"

printf '| run | profiles | exit | in SLO %% | answered late | expired | refused | needless | switches | sent |\n' >"$OUT/results.md"
printf '|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n' >>"$OUT/results.md"
for run in $(seq 1 "$RUNS"); do
    profiles=stored
    if (( run % 2 == 1 )); then
        profiles=removed
        rm -f "$MODELS"/*.profile.json "$MODELS"/*.images.json
    fi
    log "run $run/$RUNS (profiles $profiles)"
    rm -rf "$ROOT/target/demo"
    started=$(date +%s)
    set +e
    "$OUT/bin/demo" >"$OUT/run-$run.out" 2>"$OUT/run-$run.err"
    code=$?
    set -e
    took=$(( $(date +%s) - started ))
    if [[ -d "$ROOT/target/demo" ]]; then
        cp -r "$ROOT/target/demo" "$OUT/run-$run"
    fi
    python3 - "$OUT/run-$run/summary.json" "$run" "$profiles" "$code" >>"$OUT/results.md" <<'PY'
import json, sys
path, run, profiles, code = sys.argv[1:]
try:
    s = json.load(open(path))[0]
except (OSError, ValueError, IndexError):
    print(f"| {run} | {profiles} | {code} | - | - | - | - | - | - | - |")
    sys.exit()
late = s["slo_violations"] - s["rejected"] - s["expired"] - s["failed"]
in_slo = 100.0 - s["slo_violation_pct"]
needless = s.get("needless_refusals", "-")
print(f"| {run} | {profiles} | {code} | {in_slo:.2f} | {late} | {s['expired']} | {s['rejected']} | "
      f"{needless} | {s['variant_switches']} | {s['sent']} |")
PY
    log "run $run: exit $code in ${took} s; $(tail -1 "$OUT/results.md")"
done
python3 - "$OUT/results.md" <<'PY' | tee -a "$OUT/results.md"
import sys
rows = [l.split("|")[1:-1] for l in open(sys.argv[1]) if l.startswith("| ") and not l.startswith("| run")]
rows = [[c.strip() for c in r] for r in rows]
done = [r for r in rows if r[3] != "-"]
failed = sum(1 for r in rows if r[2] != "0")
sent = sum(int(r[9]) for r in done)
late = sum(int(r[4]) + int(r[5]) for r in done)
needless = sum(int(r[7]) for r in done if r[7] != "-")
share = 100.0 * late / sent if sent else 0.0
print(f"\n{len(rows)} runs: {failed} exited non-zero; {needless} needless refusals; "
      f"late or expired {late} of {sent} sent ({share:.2f} %), worst run "
      f"{max((100.0 * (int(r[4]) + int(r[5])) / int(r[9]) for r in done), default=0.0):.2f} %")
PY
cat "$OUT/results.md"
