#!/usr/bin/env bash
# Install the four agent CLIs (Copilot CLI, Claude Code, Codex, Gemini CLI) with npm into a
# local prefix, for the real-CLI tests against orchestrator-testkit's scripted model server.
#
# Idempotent: packages already installed at the requested version are left alone.
# Usage: scripts/install-agent-clis.sh [PREFIX]      (default: <repo>/.agent-clis)
# Versions can be pinned with COPILOT_VERSION, CLAUDE_VERSION, CODEX_VERSION, GEMINI_VERSION
# (default: the versions the tests were written against). Prints the bin dir on the last line of stdout.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
prefix="${1:-${AGENT_CLIS_PREFIX:-$repo_root/.agent-clis}}"
mkdir -p "$prefix"

packages=(
  "@github/copilot@${COPILOT_VERSION:-1.0.102}"
  "@anthropic-ai/claude-code@${CLAUDE_VERSION:-2.1.332}"
  "@openai/codex@${CODEX_VERSION:-0.171.0}"
  "@google/gemini-cli@${GEMINI_VERSION:-0.61.0}"
)

command -v npm >/dev/null || { echo "npm not found; install Node.js >= 20 first" >&2; exit 1; }

missing=()
for spec in "${packages[@]}"; do
  name="${spec%@*}"
  want="${spec##*@}"
  manifest="$prefix/lib/node_modules/$name/package.json"
  if [[ -f "$manifest" ]]; then
    have="$(node -p "require('$manifest').version")"
    if [[ "$want" == "latest" || "$want" == "$have" ]]; then
      echo "ok      $name $have" >&2
      continue
    fi
  fi
  missing+=("$spec")
done

if ((${#missing[@]})); then
  echo "install ${missing[*]}" >&2
  npm install --global --prefix "$prefix" --no-fund --no-audit --loglevel=error "${missing[@]}" >&2
fi

for bin in copilot claude codex gemini; do
  [[ -x "$prefix/bin/$bin" ]] || { echo "missing $prefix/bin/$bin after install" >&2; exit 1; }
done
echo "$prefix/bin"
