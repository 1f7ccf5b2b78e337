#!/usr/bin/env bash
# The dashboard (SPEC §18, issue 19) measured in Debian's Chromium (scripts/install-browser.sh):
# 1. time to first render of a plan page with 2,000 jobs (median of RUNS loads);
# 2. time to first render of the plans page with PLANS stored plans (paged);
# 3. the server's CPU while a plan's jobs change state about 50 times a second with its page
#    open (the live updates flowing), as a share of one core.
# Usage: benches/ui.sh   (env: RUNS=5 PLANS=300)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-5}
PLANS=${PLANS:-300}
DRIVER=$(HOME=$HOME bash scripts/install-browser.sh | tail -1)/playwright-core
MEASURE=$PWD/benches/ui_measure.cjs
source benches/common.sh

repo="$WORK/repo"
mkdir -p "$repo"
git -C "$repo" init -q -b main
git -C "$repo" commit -q --allow-empty -m base
cd "$repo"

start_ui() {
  "$BIN" ui --no-open >"$WORK/ui.url" 2>/dev/null &
  UI_PID=$!
  for _ in $(seq 100); do [ -s "$WORK/ui.url" ] && break; sleep 0.05; done
  URL=$(head -1 "$WORK/ui.url")
  BASE=${URL%%/\?*}
  TOKEN=${URL##*token=}
}
cleanup_more() { kill "${UI_PID:-0}" 2>/dev/null || true; }

echo "== 1. a plan page with 2,000 jobs" >&2
python3 - "$WORK/big.json" <<'PY'
import json, sys
jobs = []
for i in range(2000):
    deps = sorted({f"job-{i - 1:04d}", f"job-{i - 37:04d}"} if i >= 37 else ({f"job-{i - 1:04d}"} if i else set()))
    jobs.append({"producerId": f"job-{i:04d}", "task": f"step {i}", "work": "true", "dependencies": deps})
json.dump({"name": "big", "isolation": "none", "maxParallel": 8, "jobs": jobs}, open(sys.argv[1], "w"))
PY
"$BIN" run "$WORK/big.json" --quiet >/dev/null
big=$("$BIN" list --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["plans"][0]["planId"])')
start_ui
read -r secs nodes < <(node "$MEASURE" "$DRIVER" "$BASE/plans/$big?token=$TOKEN" render "$RUNS")
echo "ui: plan page with $nodes nodes, first render median $secs s"

echo "== 2. the plans page with $PLANS plans" >&2
printf '{"name":"tiny","isolation":"none","jobs":[{"producerId":"one","task":"t","work":"true","dependencies":[]}]}\n' >"$WORK/tiny.json"
for ((p = 1; p < PLANS; p++)); do "$BIN" run "$WORK/tiny.json" --quiet >/dev/null; done
read -r secs rows < <(node "$MEASURE" "$DRIVER" "$BASE/?token=$TOKEN" render "$RUNS")
echo "ui: plans page with $PLANS plans ($rows on the first page), first render median $secs s"

echo "== 3. server CPU while jobs change state ~50 times a second" >&2
python3 - "$WORK/busy.json" <<'PY'
import json, sys
jobs = [{"producerId": f"busy-{i:03d}", "task": "t", "work": "sleep 0.1", "dependencies": []} for i in range(600)]
json.dump({"name": "busy", "isolation": "none", "maxParallel": 5, "jobs": jobs}, open(sys.argv[1], "w"))
PY
"$BIN" run "$WORK/busy.json" --quiet >/dev/null &
RUN_PID=$!
sleep 1
busy=$("$BIN" list --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["plans"][0]["planId"])')
node "$MEASURE" "$DRIVER" "$BASE/plans/$busy?token=$TOKEN" hold 9000 &
HOLD=$!
sleep 2
ticks() { awk '{ print $14 + $15 }' "/proc/$UI_PID/stat"; }
done_jobs() { "$BIN" status "$busy" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["counts"]["succeeded"])'; }
c0=$(ticks); j0=$(done_jobs); t0=$(now)
sleep 5
c1=$(ticks); j1=$(done_jobs); t1=$(now)
wait "$HOLD"
kill "$RUN_PID" 2>/dev/null || true
wait "$RUN_PID" 2>/dev/null || true
hz=$(getconf CLK_TCK)
awk -v c="$((c1 - c0))" -v hz="$hz" -v j="$((j1 - j0))" -v a="$t0" -v b="$t1" 'BEGIN {
  s = b - a; printf "ui: server CPU %.1f%% of one core while %.0f jobs/s finished (each job 3+ state changes) with the plan page open\n", 100 * c / hz / s, j / s }'
