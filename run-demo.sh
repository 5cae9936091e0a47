#!/usr/bin/env bash
# One command: set up, then run the main job (the built-in synthetic suite, offline, on CPU).
set -euo pipefail
cd "$(dirname "$0")"
./scripts/setup.sh
exec .venv/bin/worldrecall run "$@"
