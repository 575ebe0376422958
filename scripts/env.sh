# Source this file to use the workspace: `source scripts/env.sh`.
# It activates .venv (pip-only ROS 2) unless a full ROS 2 install is active, then sources the
# colcon install space so that the workspace's packages, messages and executables are found.
_r2s2r_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ -z "${ROS_DISTRO:-}" ] && [ -f "$_r2s2r_root/.venv/bin/activate" ]; then
  # shellcheck disable=SC1091
  source "$_r2s2r_root/.venv/bin/activate"
  export AMENT_PREFIX_PATH="$_r2s2r_root/.venv${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}"
fi
if [ -f "$_r2s2r_root/install/setup.bash" ]; then
  # shellcheck disable=SC1091
  source "$_r2s2r_root/install/setup.bash"
  # The r2s2r command line (an ament_python script lives in lib/<package>, not on PATH).
  case ":$PATH:" in
    *":$_r2s2r_root/install/r2s2r/lib/r2s2r:"*) ;;
    *) export PATH="$_r2s2r_root/install/r2s2r/lib/r2s2r:$PATH" ;;
  esac
else
  echo "r2s2r: install/ not found; run scripts/setup.sh first" >&2
fi
export MUJOCO_GL="${MUJOCO_GL:-egl}"
unset _r2s2r_root
