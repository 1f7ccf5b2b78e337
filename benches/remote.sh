#!/usr/bin/env bash
# Remote execution on PostgreSQL (SPEC §16), on this machine:
#
# 1. Scaling: the same 64-job plan (each job `sleep 1` then a file write, worktree isolation,
#    no dependencies) coordinated by `orchestrator run --database URL --remote GIT_URL` and run
#    by 1, 2 and 4 `orchestrator worker --slots 1` processes. Wall time, throughput, and the
#    ratio to the ideal (JOBS x 1 s / workers): goal >= 0.8 up to 4 workers.
# 2. Overhead: 32 independent `true` jobs, one at a time (maxParallel 1; one worker with one
#    slot), on the local path (`orchestrator run`) and the remote one; median of RUNS runs each,
#    per job, and the difference (what the queue, the pushes and fetches and the in-memory
#    merges add per job).
#
# Usage: benches/remote.sh   (env: JOBS=64 WORKERS="1 2 4" SMALL=32 RUNS=5 PART=all|scale|overhead
#                             DATABASE=postgres://postgres@127.0.0.1:5432/postgres)
# Needs a PostgreSQL server (the database given is used to create and drop scratch ones);
# builds the CLI in release mode.
set -euo pipefail
cd "$(dirname "$0")/.."

JOBS=${JOBS:-64}
WORKERS=${WORKERS:-"1 2 4"}
SMALL=${SMALL:-32}
RUNS=${RUNS:-5}
PART=${PART:-all}
ADMIN=${DATABASE:-postgres://postgres@127.0.0.1:5432/postgres}
SERVER=${ADMIN%/*}

PIDS=()
cleanup_more() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  psql "$ADMIN" -XAtqc "DROP DATABASE IF EXISTS orch_bench WITH (FORCE)" >/dev/null 2>&1 || true
}
source benches/common.sh

fresh_db() {
  psql "$ADMIN" -XAtqc "DROP DATABASE IF EXISTS orch_bench WITH (FORCE)" >/dev/null
  psql "$ADMIN" -XAtqc "CREATE DATABASE orch_bench" >/dev/null
  echo "$SERVER/orch_bench"
}

# A repository and a bare remote holding it, fresh for each run.
fresh_repo() {
  rm -rf "$WORK/repo" "$WORK/remote.git" "$WORK/workers"
  git init -q -b main "$WORK/repo"
  echo hello > "$WORK/repo/README.md"
  git -C "$WORK/repo" add -A && git -C "$WORK/repo" commit -qm init
  git init -q --bare "$WORK/remote.git"
}

plan() { # plan FILE N PARALLEL WORK [EXTRA_JOB_FIELDS]
  {
    printf '{"name":"bench","targetBranch":"result","maxParallel":%d,"jobs":[' "$3"
    for ((i = 0; i < $2; i++)); do
      if ((i > 0)); then printf ','; fi
      printf '{"producerId":"job-%03d","task":"t","dependencies":[],"work":"%s"%s}' "$i" "${4//@/$i}" "${5:-}"
    done
    printf ']}'
  } > "$1"
}

start_workers() { # start_workers DB N
  for ((w = 0; w < $2; w++)); do
    "$BIN" worker --database "$1" --slots 1 --dir "$WORK/workers" --name "w$w" 2>/dev/null &
    PIDS+=($!)
  done
}

stop_workers() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  PIDS=()
}

remote_run() { # remote_run PLAN DB -> seconds
  local t0 t1
  t0=$(now)
  (cd "$WORK/repo" && "$BIN" run "$1" --database "$2" --remote "file://$WORK/remote.git" -q >/dev/null)
  t1=$(now)
  elapsed "$t0" "$t1"
}

# ---------------------------------------------------------------------------------------------
if [ "$PART" != overhead ]; then
echo "== 1. ${JOBS} jobs of \`sleep 1\` + a file write, on ${WORKERS// /, } workers (1 slot each)"
plan "$WORK/scale.json" "$JOBS" "$JOBS" "sleep 1; echo @ > out-@.txt"
printf '  %-8s %9s %10s %9s %8s\n' workers wall_s jobs_per_s ideal_s ratio
for n in $WORKERS; do
  fresh_repo
  db=$(fresh_db)
  start_workers "$db" "$n"
  s=$(remote_run "$WORK/scale.json" "$db")
  stop_workers
  files=$(git -C "$WORK/repo" ls-tree --name-only result | grep -c '^out-' || true)
  [ "$files" = "$JOBS" ] || { echo "the result holds $files of $JOBS files" >&2; exit 1; }
  awk -v n="$n" -v s="$s" -v j="$JOBS" 'BEGIN { ideal = j / n;
    printf "  %-8d %9.2f %10.2f %9.1f %8.2f\n", n, s, j / s, ideal, ideal / s }'
done
fi

# ---------------------------------------------------------------------------------------------
if [ "$PART" != scale ]; then
echo "== 2. ${SMALL} \`true\` jobs one at a time: local path vs remote path (median of ${RUNS})"
plan "$WORK/small.json" "$SMALL" 1 "true" ',"expectsNoChanges":true' 
local_times=() remote_times=()
for ((r = 0; r < RUNS; r++)); do
  fresh_repo
  t0=$(now)
  (cd "$WORK/repo" && "$BIN" run "$WORK/small.json" -q >/dev/null)
  t1=$(now)
  local_times+=("$(elapsed "$t0" "$t1")")
  fresh_repo
  db=$(fresh_db)
  start_workers "$db" 1
  remote_times+=("$(remote_run "$WORK/small.json" "$db")")
  stop_workers
done
l=$(printf '%s\n' "${local_times[@]}" | median)
m=$(printf '%s\n' "${remote_times[@]}" | median)
awk -v l="$l" -v m="$m" -v j="$SMALL" 'BEGIN {
  printf "  local : %.3f s, %.1f ms per job\n", l, 1000 * l / j
  printf "  remote: %.3f s, %.1f ms per job\n", m, 1000 * m / j
  printf "  remote - local: %.1f ms per job; ratio %.2fx\n", 1000 * (m - l) / j, m / l }'
fi
