#!/usr/bin/env bash
# Install the Python test dependencies (the official MCP SDK, PyPI `mcp`) into a venv, for
# orchestrator-cli/tests/python_mcp.rs (a real third-party MCP client driving `orchestrator mcp`).
#
# Idempotent and quiet: an existing venv with `mcp` importable is left alone.
# Usage: scripts/install-test-deps.sh [VENV]        (default: <repo>/.venv-ci)
# Env: PYTHON (interpreter creating the venv, default python3), MCP_VERSION (pin, default latest).
# Prints the venv's python on the last line of stdout.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${1:-${VENV_CI:-$repo_root/.venv-ci}}"
python="${PYTHON:-python3}"
spec="mcp${MCP_VERSION:+==$MCP_VERSION}"

command -v "$python" >/dev/null || { echo "$python not found; install Python >= 3.10 first" >&2; exit 1; }

if [[ ! -x "$venv/bin/python" ]]; then
  "$python" -m venv "$venv"
fi

have="$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("mcp"))' 2>/dev/null || true)"
if [[ -z "$have" || ( -n "${MCP_VERSION:-}" && "$have" != "$MCP_VERSION" ) ]]; then
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$spec"
  have="$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("mcp"))')"
fi
echo "mcp $have in $venv" >&2
echo "$venv/bin/python"
