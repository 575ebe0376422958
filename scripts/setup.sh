#!/usr/bin/env bash
# One-command, idempotent set-up of the r2s2r workspace on a fresh machine (pip-only ROS 2):
#   1. Debian libraries the wheels need (libusb for Open3D), only when missing;
#   2. a virtual environment in .venv with the pinned requirements (torch: CPU wheel from disk);
#   3. the build-machine paths in the ROS wheels' CMake files rewritten to this machine's;
#   4. colcon build of the workspace (interfaces with rosidl, Python packages, bring-up).
# Each step is skipped when its inputs did not change, so a second run takes seconds.
# In a full ROS 2 install (ROS_DISTRO set, e.g. in docker/), steps 2-3 are skipped and the system
# tf2_msgs is used instead of the workspace's copy.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="$ROOT/.venv"
PYTHON="${R2S2R_PYTHON:-python3.11}"
STARTED=$(date +%s)
log() { echo "[setup] $*"; }
quiet_pip() { "$VENV/bin/pip" "$@" 2>&1 | grep -v "is ignored: it is neither a file nor a directory" || true; }

# 1. Debian libraries.
if ! ldconfig -p | grep -q "libusb-1.0.so.0"; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
    log "installing libusb-1.0-0 (needed by Open3D)"
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libusb-1.0-0 >/dev/null
  else
    log "warning: libusb-1.0-0 is missing and cannot be installed here; Open3D will not import"
  fi
fi

if [ -z "${ROS_DISTRO:-}" ]; then
  # 2. Virtual environment with pinned requirements.
  if [ ! -x "$VENV/bin/python" ]; then
    command -v "$PYTHON" >/dev/null || { echo "[setup] error: $PYTHON not found (set R2S2R_PYTHON)" >&2; exit 2; }
    log "creating $VENV with $PYTHON"
    "$PYTHON" -m venv "$VENV"
  fi
  REQ_STAMP="$VENV/.r2s2r-requirements.sha256"
  REQ_HASH="$(sha256sum requirements.txt | cut -d' ' -f1)"
  if [ "$(cat "$REQ_STAMP" 2>/dev/null)" != "$REQ_HASH" ]; then
    log "installing pinned requirements (first run: a few minutes)"
    quiet_pip install -q --upgrade pip
    # torch first and alone, so that nothing can resolve it to a CUDA build.
    quiet_pip install -q torch==2.13.0
    quiet_pip install -q -r requirements.txt
    "$VENV/bin/python" - <<'PY'
import torch, sys
if torch.version.cuda is not None:
    sys.exit(f"[setup] error: a CUDA torch was installed ({torch.__version__}); expected the CPU build")
PY
    echo "$REQ_HASH" > "$REQ_STAMP"
  else
    log "requirements up to date"
  fi
  # shellcheck disable=SC1091
  source "$VENV/bin/activate"

  # 3. The ROS wheels' CMake exports name the wheel build machine's Python and numpy includes.
  PY_INCLUDE="$(python -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
  NP_INCLUDE="$(python -c 'import numpy; print(numpy.get_include())')"
  mapfile -t CMAKE_FILES < <(grep -l "/opt/python/cp311-cp311" "$VENV"/share/*/cmake/*.cmake 2>/dev/null || true)
  if [ "${#CMAKE_FILES[@]}" -gt 0 ]; then
    log "rewriting build-machine include paths in ${#CMAKE_FILES[@]} CMake files"
    sed -i "s|/opt/python/cp311-cp311/lib/python3.11/site-packages/numpy/_core/include|$NP_INCLUDE|g; s|/opt/python/cp311-cp311/include/python3.11|$PY_INCLUDE|g" "${CMAKE_FILES[@]}"
  fi
  export AMENT_PREFIX_PATH="$VENV${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}"
  export CMAKE_PREFIX_PATH="$VENV${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
  PYTHON_BIN="$VENV/bin/python"
else
  PYTHON_BIN="$(command -v python3)"
fi

# 4. colcon build, skipped when no build input changed since the last successful build.
SKIP=()
if [ -n "${ROS_DISTRO:-}" ] && [ -d "/opt/ros/$ROS_DISTRO/share/tf2_msgs" ]; then
  SKIP=(--packages-skip tf2_msgs)
fi
BUILD_STAMP="$ROOT/install/.r2s2r-build.sha256"
BUILD_HASH="$( { git ls-files -co --exclude-standard -- src r2s2r config launch resource \
    package.xml setup.py setup.cfg colcon.meta | sort | xargs -r sha256sum; echo "${SKIP[*]:-}"; } \
  | sha256sum | cut -d' ' -f1)"
mkdir -p log
if [ "$(cat "$BUILD_STAMP" 2>/dev/null)" != "$BUILD_HASH" ] || [ ! -f install/setup.bash ]; then
  log "building the workspace with colcon"
  # The bring-up's config/ and launch/ and every Python package are installed as copies: drop
  # the old copies first (and the build folders they are copied from), so that a module moved
  # or removed in the source tree does not stay importable from the install.
  rm -rf install/r2s2r/share/r2s2r/config install/r2s2r/share/r2s2r/launch
  for setup_py in setup.py src/*/setup.py; do
    package="$(basename "$(dirname "$(realpath "$setup_py")")")"
    [ "$setup_py" = setup.py ] && package=r2s2r
    rm -rf "build/$package" install/"$package"/lib/python3*/site-packages/"$package"
  done
  colcon --log-base log build --base-paths src . "${SKIP[@]}" \
    --event-handlers console_cohesion- summary+ status- \
    --cmake-args -DPython3_EXECUTABLE="$PYTHON_BIN" -DBUILD_TESTING=OFF > log/colcon-build.txt 2>&1 \
    || { mkdir -p log; tail -40 log/colcon-build.txt >&2 || true; echo "[setup] error: colcon build failed (full log: log/colcon-build.txt)" >&2; exit 1; }
  echo "$BUILD_HASH" > "$BUILD_STAMP"
else
  log "workspace build up to date"
fi
log "done in $(( $(date +%s) - STARTED )) s; use: source scripts/env.sh"
