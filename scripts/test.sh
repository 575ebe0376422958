#!/usr/bin/env bash
# The workspace's test command: format + lint (ruff), type check (mypy), then the whole test
# suite in its three tiers (pytest: unit = plain Python, node = in-process rclpy, graph =
# separate processes; see conftest.py). CI runs this.
#   scripts/test.sh --fast   ruff, then the unit tier without the tests marked slow (< 1 min), on
#                            min(cores, 4) pytest-xdist workers (R2S2R_TEST_WORKERS overrides; 0 = serial)
#   scripts/test.sh          everything: the unit tier on the workers, then the node and graph tiers
#                            one test at a time
# Extra arguments go to pytest, e.g. `scripts/test.sh -k launch`, `scripts/test.sh --tier node`
# (then one pytest run, serial).
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
  WORKERS="${R2S2R_TEST_WORKERS:-$(( $(nproc) < 4 ? $(nproc) : 4 ))}"
  PARALLEL=()
  if [ "$WORKERS" -gt 1 ]; then
    # Unit tests share nothing (no ROS graph, no processes, tmp_path each); loadscope keeps a
    # module's tests (and its module-scoped fixtures) on one worker.
    PARALLEL=(-n "$WORKERS" --dist loadscope)
  fi
  echo "== pytest (unit tier, not slow, ${WORKERS} worker(s))"
  python -m pytest -q --tier unit -m "not slow" "${PARALLEL[@]}" tests src "$@"
  echo "== fast tests finished in $(( $(date +%s) - STARTED )) s"
  exit 0
fi

echo "== mypy"
mapfile -t PACKAGES < <(find src -mindepth 2 -maxdepth 2 -type d -name 'r2s2r_*' -not -name '*_interfaces' | sort)
MYPYPATH="$(find src -mindepth 1 -maxdepth 1 -type d | paste -sd:):$ROOT" \
  mypy --no-error-summary "${PACKAGES[@]}" r2s2r

WORKERS="${R2S2R_TEST_WORKERS:-$(( $(nproc) < 4 ? $(nproc) : 4 ))}"
if [ "$#" -gt 0 ] || [ "$WORKERS" -le 1 ]; then
  echo "== pytest"
  python -m pytest -q tests src "$@"
else
  # The unit tier shares nothing between tests: on the workers, as --fast runs it. The node
  # and graph tiers (rclpy contexts, launched graphs, ROS traffic) run one test at a time.
  echo "== pytest (unit tier, ${WORKERS} workers)"
  python -m pytest -q --tier unit -n "$WORKERS" --dist loadscope tests src
  echo "== pytest (node and graph tiers)"
  python -m pytest -q --tier node --tier graph tests src
fi
echo "== tests finished in $(( $(date +%s) - STARTED )) s"
