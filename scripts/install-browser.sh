#!/usr/bin/env bash
# Install what the dashboard's browser tests need (orchestrator-cli/tests/ui.rs): Debian's
# Chromium, and playwright-core from npm (a DevTools-protocol driver; it downloads no browser of
# its own) into a local prefix.
#
# Idempotent: what is installed at the requested version is left alone.
# Usage: scripts/install-browser.sh [PREFIX]      (default: <repo>/.browser-driver)
# Env: PLAYWRIGHT_VERSION (default: the version the tests were written against).
# Prints the driver's node_modules folder on the last line of stdout.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
prefix="${1:-${BROWSER_DRIVER_PREFIX:-$repo_root/.browser-driver}}"
version="${PLAYWRIGHT_VERSION:-1.65.1}"

if ! command -v chromium >/dev/null 2>&1; then
  sudo=""
  if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
  $sudo apt-get install -y -qq chromium >/dev/null 2>&1 \
    || { $sudo apt-get update -qq >/dev/null 2>&1 && $sudo apt-get install -y -qq chromium >/dev/null 2>&1; } \
    || { echo "chromium could not be installed (Debian package chromium)" >&2; exit 1; }
fi
echo "ok      $(chromium --version 2>/dev/null | head -1)" >&2

command -v npm >/dev/null || { echo "npm not found; install Node.js >= 20 first" >&2; exit 1; }
manifest="$prefix/node_modules/playwright-core/package.json"
if [[ ! -f "$manifest" || "$(node -p "require('$manifest').version")" != "$version" ]]; then
  mkdir -p "$prefix"
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --silent --no-audit --no-fund --prefix "$prefix" \
    "playwright-core@$version" >&2
fi
echo "ok      playwright-core $(node -p "require('$manifest').version")" >&2
echo "$prefix/node_modules"
