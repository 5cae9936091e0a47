#!/usr/bin/env bash
# Sets up everything worldrecall needs on a fresh Debian/Ubuntu machine with Python 3.11:
# Debian's libusb (open3d), a virtual environment at .venv, torch/torchvision first, then the project.
# Idempotent: a second call finds the stamp in .venv (a hash of pyproject.toml, this script and the checkout's
# path, written after a complete install), prints one line and returns in a second or two without calling pip.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
VENV=${VENV:-.venv}

if ! ldconfig -p 2>/dev/null | grep -q 'libusb-1.0.so.0'; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null && SUDO="sudo"
  $SUDO apt-get install -y --no-install-recommends libusb-1.0-0 >/dev/null 2>&1 || {
    $SUDO apt-get update >/dev/null && $SUDO apt-get install -y --no-install-recommends libusb-1.0-0 >/dev/null; }
fi

[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
. "$VENV/bin/activate"

# Everything below installs only when what it installs from changed since the last complete setup.
STAMP="$VENV/.worldrecall-setup.sha256"
# the locked set (requirements.lock, made by scripts/lock.sh) unless WORLDRECALL_UNPINNED=1 asks for the newest
# releases pyproject.toml's ranges allow (what CI's drift line reports)
UNPINNED=${WORLDRECALL_UNPINNED:-0}
WANT=$( { cat pyproject.toml requirements.lock scripts/setup.sh; pwd; python -V; echo "unpinned=$UNPINNED"; } \
        | sha256sum | cut -d' ' -f1)

# A one-node SLURM cluster for tests/test_slurm_cluster.py (Debian's slurm-wlm + munge), when asked:
# WORLDRECALL_SETUP_CLUSTER=1 (./run-tests.sh asks). Optional: the test skips with a reason where it is missing.
# Its own step, tried once per stamp: a machine where apt-get cannot install it (no root, no network) neither
# retries on every call nor reinstalls the Python packages because of it.
TRIED="$VENV/.worldrecall-cluster-tried.sha256"
SBIN=${WORLDRECALL_SBIN:-/usr/sbin}  # where Debian puts slurmctld and munged (tests/test_setup_script.py moves it)
if [ "${WORLDRECALL_SETUP_CLUSTER:-0}" = "1" ] && { [ ! -x "$SBIN/slurmctld" ] || [ ! -x "$SBIN/munged" ]; } \
   && [ "$(cat "$TRIED" 2>/dev/null)" != "$WANT" ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null && SUDO="sudo"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends slurm-wlm munge >/dev/null 2>&1 || {
    $SUDO apt-get update >/dev/null 2>&1 &&
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends slurm-wlm munge >/dev/null 2>&1; } \
    || echo "note: could not install slurm-wlm/munge (apt-get); the SLURM cluster test will be skipped" >&2
  echo "$WANT" > "$TRIED"
fi

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ] \
   && python -c "import worldrecall, sys; sys.exit(not worldrecall.__file__.startswith('$(pwd)/'))" 2>/dev/null; then
  echo "setup: $VENV is current (pyproject.toml and scripts/setup.sh unchanged since the last setup); nothing to install"
  exit 0
fi

# Headless Chromium renders the HTML report in the tests (tests/test_report.py); optional: the test skips
# with a reason where it is missing, so a failed install here is reported, not fatal.
if [ ! -x /usr/bin/chromium ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null && SUDO="sudo"
  $SUDO apt-get install -y --no-install-recommends chromium >/dev/null 2>&1 || {
    $SUDO apt-get update >/dev/null 2>&1 && $SUDO apt-get install -y --no-install-recommends chromium >/dev/null 2>&1; } \
    || echo "note: could not install chromium (apt-get); the browser check of the HTML report will be skipped" >&2
fi
# qemu-user runs the suite renderer as another CPU (an AVX2-only AMD EPYC) in tests/test_isa_emulated.py;
# optional like Chromium: the test skips with a reason where it is missing.
if ! command -v qemu-x86_64 >/dev/null; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null && SUDO="sudo"
  $SUDO apt-get install -y --no-install-recommends qemu-user >/dev/null 2>&1 || {
    $SUDO apt-get update >/dev/null 2>&1 && $SUDO apt-get install -y --no-install-recommends qemu-user >/dev/null 2>&1; } \
    || echo "note: could not install qemu-user (apt-get); the emulated-CPU check of the suite will be skipped" >&2
fi

python -m pip install -q -U pip
# setuptools' "Editable installation … be careful with folders … same name as your package" notice is
# information only (recent pip shows a build backend's warnings even with -q): filtered by its message.
export PYTHONWARNINGS="ignore:Editable installation${PYTHONWARNINGS:+,$PYTHONWARNINGS}"
if [ "$UNPINNED" = "1" ]; then
  # torch first, pinned to what this machine's local wheels provide; the project's ranges keep it.
  # TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu picks the CPU-only wheels (no ~4 GB of CUDA libraries).
  python -c "import torch, torchvision" 2>/dev/null \
    || python -m pip install -q ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"} torch==2.14.1 torchvision==0.29.1
  # `ui`: the printed `mlflow ui` line needs the full mlflow server (flask_cors, gunicorn …), not only the client.
  python -m pip install -q -e ".[all,ui,dev]"
else
  # every dependency at the locked version, each file checked against its hash; then worldrecall itself
  python -m pip install -q --require-hashes -r requirements.lock
  python -m pip install -q --no-deps -e .
fi
# pyiqa without its heavy, unused dependency tree (and its opencv-python clash); PolyForm-Noncommercial licence.
python -c "import pyiqa" 2>/dev/null || python -m pip install -q --no-deps "pyiqa==0.1.16"
echo "$WANT" > "$STAMP"
