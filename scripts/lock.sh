#!/usr/bin/env bash
# Regenerates requirements.lock: every Python dependency of worldrecall[all,ui,dev], pinned, with hashes,
# resolved by uv (`uv pip compile`) for CPython 3.11 on x86-64 Linux (glibc 2.36, Debian 12).
#   ./scripts/lock.sh            # newest releases the ranges in pyproject.toml allow (then rerun the tests)
#   ./scripts/lock.sh --keep     # the versions installed in .venv now (lock what was tested)
# torch/torchvision stay at the releases this machine's pip takes from disk (scripts/setup.sh). pyiqa is pinned
# in scripts/setup.sh itself: it installs without its dependencies (--no-deps), so it is not part of this set.
set -euo pipefail
cd "$(dirname "$0")/.."
UV_VENV=${UV_VENV:-$(mktemp -d)/uv}
[ -x "$UV_VENV/bin/uv" ] || { python3 -m venv "$UV_VENV" && "$UV_VENV/bin/pip" install -q uv; }
CONSTRAINTS=$(mktemp)
printf 'torch==2.14.1\ntorchvision==0.29.1\n' > "$CONSTRAINTS"
if [ "${1:-}" = "--keep" ]; then
  .venv/bin/python -m pip freeze --exclude-editable | grep -v -i -e '^pyiqa==' -e '^-e ' >> "$CONSTRAINTS"
fi
{
  echo "# requirements.lock: worldrecall[all,ui,dev]'s dependencies, pinned with hashes (made by ./scripts/lock.sh"
  echo "# with uv pip compile; CPython 3.11, x86-64 Linux). scripts/setup.sh installs exactly this set with"
  echo "# pip --require-hashes; WORLDRECALL_UNPINNED=1 ./scripts/setup.sh installs the newest allowed instead."
  "$UV_VENV/bin/uv" pip compile pyproject.toml --extra all --extra ui --extra dev --generate-hashes \
    --python-version 3.11 --python-platform x86_64-manylinux_2_36 -c "$CONSTRAINTS" \
    --no-header --no-annotate 2>/dev/null
} > requirements.lock
rm -f "$CONSTRAINTS"
echo "requirements.lock: $(grep -c '^[A-Za-z]' requirements.lock) packages"
