#!/usr/bin/env bash
# One command: set up, then run the test suite (offline: HF_HUB_OFFLINE=1 is set by tests/conftest.py).
set -euo pipefail
cd "$(dirname "$0")"
# the SLURM test (tests/test_slurm_cluster.py) starts a real one-node cluster: setup installs slurm-wlm + munge
WORLDRECALL_SETUP_CLUSTER=${WORLDRECALL_SETUP_CLUSTER:-1} ./scripts/setup.sh
exec .venv/bin/python -m pytest -q "$@"
