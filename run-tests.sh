#!/usr/bin/env bash
# One command: set up, then run the test suite (offline: HF_HUB_OFFLINE=1 is set by tests/conftest.py).
set -euo pipefail
cd "$(dirname "$0")"
./scripts/setup.sh
exec .venv/bin/python -m pytest -q "$@"
