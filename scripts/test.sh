#!/usr/bin/env bash
# The workspace's test command: format + lint (ruff), type check (mypy), then the whole test
# suite (pytest: core unit tests, in-process rclpy tests, graph tests with separate processes).
# Extra arguments go to pytest, e.g. `scripts/test.sh -k launch`.
set -eo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# shellcheck disable=SC1091
source scripts/env.sh
STARTED=$(date +%s)

echo "== ruff"
ruff format --check --quiet . || { echo "ruff format: run 'ruff format .'" >&2; exit 1; }
ruff check --quiet .

echo "== mypy"
mapfile -t PACKAGES < <(find src -mindepth 2 -maxdepth 2 -type d -name 'r2s2r_*' -not -name '*_interfaces' | sort)
MYPYPATH="$(find src -mindepth 1 -maxdepth 1 -type d | paste -sd:):$ROOT" \
  mypy --no-error-summary "${PACKAGES[@]}" r2s2r

echo "== pytest"
python -m pytest -q tests src "$@"
echo "== tests finished in $(( $(date +%s) - STARTED )) s"
