#!/usr/bin/env bash
# The workspace's test command: format + lint (ruff), type check (mypy), then the whole test
# suite in its three tiers (pytest: unit = plain Python, node = in-process rclpy, graph =
# separate processes; see conftest.py). CI runs this.
#   scripts/test.sh --fast   ruff, then the unit tier without the tests marked slow (< 1 min)
# Extra arguments go to pytest, e.g. `scripts/test.sh -k launch`, `scripts/test.sh --tier node`.
set -eo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# shellcheck disable=SC1091
source scripts/env.sh
STARTED=$(date +%s)
FAST=0
if [ "${1:-}" = "--fast" ]; then
  FAST=1
  shift
fi

echo "== ruff"
ruff format --check --quiet . || { echo "ruff format: run 'ruff format .'" >&2; exit 1; }
ruff check --quiet .

if [ "$FAST" = 1 ]; then
  echo "== pytest (unit tier, not slow)"
  python -m pytest -q --tier unit -m "not slow" tests src "$@"
  echo "== fast tests finished in $(( $(date +%s) - STARTED )) s"
  exit 0
fi

echo "== mypy"
mapfile -t PACKAGES < <(find src -mindepth 2 -maxdepth 2 -type d -name 'r2s2r_*' -not -name '*_interfaces' | sort)
MYPYPATH="$(find src -mindepth 1 -maxdepth 1 -type d | paste -sd:):$ROOT" \
  mypy --no-error-summary "${PACKAGES[@]}" r2s2r

echo "== pytest"
python -m pytest -q tests src "$@"
echo "== tests finished in $(( $(date +%s) - STARTED )) s"
