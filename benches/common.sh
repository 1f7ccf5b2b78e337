# Shared by the benchmark scripts (sourced): the release CLI built, a scratch folder $WORK
# removed on exit (after the caller's `cleanup_more`, when it defines one), a hermetic git
# identity, and the timing helpers.

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
echo "== building the CLI (release)" >&2
cargo build --release -q -p orchestrator-cli
BIN="$CARGO_TARGET_DIR/release/orchestrator"

WORK=$(mktemp -d)
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
