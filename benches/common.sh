# Shared by the benchmark scripts (sourced): the release CLI built, a scratch folder $WORK
# removed on exit (after the caller's `cleanup_more`, when it defines one), a hermetic git
# identity, and the timing helpers.

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
echo "== building the CLI (release)" >&2
cargo build --release -q -p orchestrator-cli
BIN="$CARGO_TARGET_DIR/release/orchestrator"

WORK=$(mktemp -d)
# Each folder made in $WORK gets a block group of its own, as a top-level folder would (ext4's
# `T` flag; ignored elsewhere). Otherwise a repository lands in the group of its parent, where
# files deleted a short while ago (the git script removes 32 worktrees a run) make ext4 scan
# past their inodes for every new file: after 36,000 deletions nearby, the orchestrator's run
# of the 900-file worktree bench took 2.1 s (3.7 s of it in the kernel) instead of 0.33 s.
chattr +T "$WORK" 2>/dev/null || true
cleanup() {
  if declare -F cleanup_more >/dev/null; then cleanup_more; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
# No global git configuration or identity leaks in; commits get one of their own.
export HOME="$WORK/home" GIT_CONFIG_NOSYSTEM=1
export GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@example.invalid
export GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=bench@example.invalid
mkdir -p "$HOME"

now() { echo "${EPOCHREALTIME/,/.}"; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
