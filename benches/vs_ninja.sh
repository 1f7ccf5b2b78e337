#!/usr/bin/env bash
# The orchestrator CLI against two baselines (SPEC §11):
#
# 1. A plain DAG task runner: the same 2000-node binary tree of `true` commands (node i depends
#    on node (i-1)/2), 8 at a time, run by `orchestrator run` (`isolation: "none"`, state persisted
#    in its file store) and by ninja (-j8, a generated build.ninja). Median of 5 runs each, and
#    the ratio (goal: <= 1.1). The orchestrator runs twice: with its default durability (every
#    state change fsynced before the jobs it enables start) and with ORCHESTRATOR_DURABILITY=flush.
# 2. The worktree pipeline: 32 independent jobs, each writing one file, on a generated repository
#    of ~900 files at maxParallel 4, against a shell script doing the same steps with the `git`
#    CLI (worktree add, write, add -A, commit, merge into a branch, worktree remove), 4 at a time.
#    Median of 5 runs each, total time and cost per job.
#
# Usage: benches/vs_ninja.sh   (env: NODES=2000 RUNS=5 JOBS=8 WT_JOBS=32 WT_PARALLEL=4 FILES=900,
#                               PART=all|tree|worktrees)
# Installs ninja-build with apt-get when ninja is missing; builds the CLI in release mode.
set -euo pipefail
cd "$(dirname "$0")/.."

NODES=${NODES:-2000}
RUNS=${RUNS:-5}
JOBS=${JOBS:-8}
WT_JOBS=${WT_JOBS:-32}
WT_PARALLEL=${WT_PARALLEL:-4}
FILES=${FILES:-900}
PART=${PART:-all}

if ! command -v ninja >/dev/null 2>&1; then
  echo "== installing ninja-build" >&2
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq >&2
  $SUDO apt-get install -y -qq ninja-build >&2
fi

source benches/common.sh

# ---------------------------------------------------------------------------------------------
if [ "$PART" != worktrees ]; then
echo "== 1. ${NODES}-node binary tree of \`true\`, -j${JOBS}" >&2

{
  printf '{"name":"tree","isolation":"none","maxParallel":%d,"jobs":[' "$JOBS"
  for ((i = 0; i < NODES; i++)); do
    if ((i > 0)); then
      printf ',{"producerId":"n-%d","task":"t","work":"true","dependencies":["n-%d"]}' "$i" $(((i - 1) / 2))
    else
      printf '{"producerId":"n-0","task":"t","work":"true","dependencies":[]}'
    fi
  done
  printf ']}\n'
} >"$WORK/tree.json"

{
  printf 'rule t\n  command = true\n  description = t $out\n'
  for ((i = 0; i < NODES; i++)); do
    if ((i > 0)); then
      printf 'build n%d: t n%d\n' "$i" $(((i - 1) / 2))
    else
      printf 'build n0: t\n'
    fi
  done
} >"$WORK/build.ninja"

orch_times=()
flush_times=()
ninja_times=()
for ((r = 1; r <= RUNS; r++)); do
  dir="$WORK/tree-$r"
  mkdir -p "$dir"
  t0=$(now)
  "$BIN" run "$WORK/tree.json" --repo "$dir" --quiet >/dev/null
  t1=$(now)
  orch_times+=("$(elapsed "$t0" "$t1")")

  # The same with state changes handed to the OS without fsync (survives kill -9, not power loss).
  dir="$WORK/tree-flush-$r"
  mkdir -p "$dir"
  t0=$(now)
  ORCHESTRATOR_DURABILITY=flush "$BIN" run "$WORK/tree.json" --repo "$dir" --quiet >/dev/null
  t1=$(now)
  flush_times+=("$(elapsed "$t0" "$t1")")

  ndir="$WORK/ninja-$r"
  mkdir -p "$ndir"
  cp "$WORK/build.ninja" "$ndir/"
  t0=$(now)
  ninja -C "$ndir" -j "$JOBS" >/dev/null
  t1=$(now)
  ninja_times+=("$(elapsed "$t0" "$t1")")
  echo "   run $r: orchestrator ${orch_times[-1]} s (flush: ${flush_times[-1]} s), ninja ${ninja_times[-1]} s" >&2
done
orch_med=$(printf '%s\n' "${orch_times[@]}" | median)
flush_med=$(printf '%s\n' "${flush_times[@]}" | median)
ninja_med=$(printf '%s\n' "${ninja_times[@]}" | median)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
echo "tree: orchestrator median ${orch_med} s, ninja median ${ninja_med} s, ratio $(ratio "$orch_med" "$ninja_med") (goal <= 1.0)"
echo "tree: orchestrator with ORCHESTRATOR_DURABILITY=flush median ${flush_med} s, ratio $(ratio "$flush_med" "$ninja_med")"
fi
[ "$PART" = tree ] && exit 0

# ---------------------------------------------------------------------------------------------
echo "== 2. ${WT_JOBS} one-file jobs in worktrees of a ${FILES}-file repository, ${WT_PARALLEL} at a time" >&2

template="$WORK/template"
mkdir -p "$template"
git -C "$template" init -q -b main
# No automatic gc: with 10,000 files the commit below would start one in the background, which
# packs and prunes the loose objects while the runs copy the template.
git -C "$template" config gc.auto 0
for ((f = 0; f < FILES; f++)); do
  d="$template/src/m$((f / 30))"
  mkdir -p "$d"
  printf 'module %d\nline two\nline three\n' "$f" >"$d/f$f.txt"
done
git -C "$template" add -A
git -C "$template" commit -q -m "base"

{
  printf '{"name":"wide","maxParallel":%d,"jobs":[' "$WT_PARALLEL"
  for ((j = 0; j < WT_JOBS; j++)); do
    ((j > 0)) && printf ','
    printf '{"producerId":"job-%d","task":"write out/%d.txt","work":"mkdir -p out && echo %d > out/%d.txt","dependencies":[]}' "$j" "$j" "$j" "$j"
  done
  printf ']}\n'
} >"$WORK/wide.json"

# The same steps with the git CLI: one job = worktree add, write, add -A, commit, merge into the
# result branch (in memory with merge-tree, serialized by a lock as the orchestrator does),
# worktree remove.
cat >"$WORK/git-job.sh" <<'EOF'
#!/usr/bin/env bash
set -euo pipefail
repo=$1 j=$2
wt="$repo/.wt/job-$j"
# Worktree administration is serialized, as the orchestrator does (git's is not safe to race).
flock "$repo/.git/worktree.lock" git -C "$repo" worktree add -q --detach "$wt" main
mkdir -p "$wt/out" && echo "$j" >"$wt/out/$j.txt"
git -C "$wt" add -A
git -C "$wt" commit -q -m "[Plan] write out/$j.txt"
c=$(git -C "$wt" rev-parse HEAD)
flock "$repo/.git/merge.lock" bash -c '
  set -euo pipefail
  repo=$1 c=$2
  tip=$(git -C "$repo" rev-parse result)
  tree=$(git -C "$repo" merge-tree --write-tree "$tip" "$c")
  m=$(git -C "$repo" commit-tree "$tree" -p "$tip" -p "$c" -m "merge $c")
  git -C "$repo" update-ref refs/heads/result "$m" "$tip"
' _ "$repo" "$c"
flock "$repo/.git/worktree.lock" git -C "$repo" worktree remove --force "$wt"
EOF
chmod +x "$WORK/git-job.sh"

wt_orch=()
wt_flush=()
wt_git=()
wt_disk=()
for ((r = 1; r <= RUNS; r++)); do
  repo="$WORK/wide-$r"
  cp -a "$template" "$repo"
  sync # start each timed run with no writeback pending from the previous one
  t0=$(now)
  "$BIN" run "$WORK/wide.json" --repo "$repo" --quiet >/dev/null
  t1=$(now)
  wt_orch+=("$(elapsed "$t0" "$t1")")
  files=$(git -C "$repo" ls-tree -r --name-only orchestrator/wide -- out | wc -l)
  [ "$files" = "$WT_JOBS" ] || { echo "orchestrator result has $files files, not $WT_JOBS" >&2; exit 1; }
  # Disk the plan's worktrees, and those pooled for reuse, still hold once it has ended.
  wt_disk+=("$(du -sck "$repo/.worktrees" "$repo/.git/orchestrator/worktree-pool" 2>/dev/null | awk 'END {print $1}')")

  # The same with state changes handed to the OS without fsync (survives kill -9, not power
  # loss): the git CLI script fsyncs nothing, and the orchestrator fsyncs its journal about
  # five times a job (off the jobs' path: none waits for the journal).
  frepo="$WORK/wide-flush-$r"
  cp -a "$template" "$frepo"
  sync
  t0=$(now)
  ORCHESTRATOR_DURABILITY=flush "$BIN" run "$WORK/wide.json" --repo "$frepo" --quiet >/dev/null
  t1=$(now)
  wt_flush+=("$(elapsed "$t0" "$t1")")
  files=$(git -C "$frepo" ls-tree -r --name-only orchestrator/wide -- out | wc -l)
  [ "$files" = "$WT_JOBS" ] || { echo "orchestrator (flush) result has $files files, not $WT_JOBS" >&2; exit 1; }

  grepo="$WORK/git-$r"
  cp -a "$template" "$grepo"
  git -C "$grepo" branch result main
  sync
  t0=$(now)
  seq 0 $((WT_JOBS - 1)) | xargs -P "$WT_PARALLEL" -I{} "$WORK/git-job.sh" "$grepo" {}
  t1=$(now)
  wt_git+=("$(elapsed "$t0" "$t1")")
  files=$(git -C "$grepo" ls-tree -r --name-only result -- out | wc -l)
  [ "$files" = "$WT_JOBS" ] || { echo "git script result has $files files, not $WT_JOBS" >&2; exit 1; }
  echo "   run $r: orchestrator ${wt_orch[-1]} s (flush: ${wt_flush[-1]} s), git CLI script ${wt_git[-1]} s" >&2
done
wo_med=$(printf '%s\n' "${wt_orch[@]}" | median)
wf_med=$(printf '%s\n' "${wt_flush[@]}" | median)
wg_med=$(printf '%s\n' "${wt_git[@]}" | median)
# Cost per job: a job's share of the wall time with WT_PARALLEL running at once (its own work,
# one `echo`, is negligible).
per() { awk -v t="$1" -v n="$WT_JOBS" -v p="$WT_PARALLEL" 'BEGIN { printf "%.1f", t * p / n * 1000 }'; }
echo "worktrees: orchestrator median ${wo_med} s ($(per "$wo_med") ms per job), git CLI script median ${wg_med} s ($(per "$wg_med") ms per job), ratio $(awk -v a="$wo_med" -v b="$wg_med" 'BEGIN { printf "%.2f", a / b }')"
echo "worktrees: orchestrator with ORCHESTRATOR_DURABILITY=flush median ${wf_med} s ($(per "$wf_med") ms per job), ratio $(awk -v a="$wf_med" -v b="$wg_med" 'BEGIN { printf "%.2f", a / b }')"
echo "worktrees: disk held by worktrees after the plan, median $(printf '%s\n' "${wt_disk[@]:-0}" | median) KiB (${FILES}-file repository)"
