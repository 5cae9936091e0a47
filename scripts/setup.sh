#!/usr/bin/env bash
# Sets up everything worldrecall needs on a fresh Debian/Ubuntu machine with Python 3.11:
# Debian's libusb (open3d), a virtual environment at .venv, torch/torchvision first, then the project.
# Idempotent: a second call only checks what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
VENV=${VENV:-.venv}

if ! ldconfig -p 2>/dev/null | grep -q 'libusb-1.0.so.0'; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null && SUDO="sudo"
  $SUDO apt-get install -y --no-install-recommends libusb-1.0-0 >/dev/null 2>&1 || {
    $SUDO apt-get update >/dev/null && $SUDO apt-get install -y --no-install-recommends libusb-1.0-0 >/dev/null; }
fi

# Headless Chromium renders the HTML report in the tests (tests/test_report.py); optional: the test skips
# with a reason where it is missing, so a failed install here is reported, not fatal.
if [ ! -x /usr/bin/chromium ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null && SUDO="sudo"
  $SUDO apt-get install -y --no-install-recommends chromium >/dev/null 2>&1 || {
    $SUDO apt-get update >/dev/null 2>&1 && $SUDO apt-get install -y --no-install-recommends chromium >/dev/null 2>&1; } \
    || echo "note: could not install chromium (apt-get); the browser check of the HTML report will be skipped" >&2
fi

# A one-node SLURM cluster for tests/test_slurm_cluster.py (Debian's slurm-wlm + munge), when asked:
# WORLDRECALL_SETUP_CLUSTER=1 (./run-tests.sh asks). Optional: the test skips with a reason where it is missing.
if [ "${WORLDRECALL_SETUP_CLUSTER:-0}" = "1" ] && { [ ! -x /usr/sbin/slurmctld ] || [ ! -x /usr/sbin/munged ]; }; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null && SUDO="sudo"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends slurm-wlm munge >/dev/null 2>&1 || {
    $SUDO apt-get update >/dev/null 2>&1 &&
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends slurm-wlm munge >/dev/null 2>&1; } \
    || echo "note: could not install slurm-wlm/munge (apt-get); the SLURM cluster test will be skipped" >&2
fi

[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
. "$VENV/bin/activate"
python -m pip install -q -U pip
# torch first, pinned to what this machine's local wheels provide; the project's ranges keep it.
python -c "import torch, torchvision" 2>/dev/null || python -m pip install -q torch==2.14.1 torchvision==0.29.1
python -m pip install -q -e ".[all,dev]"
# pyiqa without its heavy, unused dependency tree (and its opencv-python clash); PolyForm-Noncommercial licence.
python -c "import pyiqa" 2>/dev/null || python -m pip install -q --no-deps "pyiqa==0.1.16"
