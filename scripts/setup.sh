#!/usr/bin/env bash
# Set up everything vmlab needs on a fresh Debian machine of this kind: system packages,
# a project-local virtualenv with pinned Python packages, and the Rust extension built
# into it. Idempotent: re-runs only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v valgrind >/dev/null 2>&1 || need_apt+=(valgrind)
command -v cc >/dev/null 2>&1 || need_apt+=(gcc)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing ${need_apt[*]} (apt-get)"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PY" -m venv .venv
fi
stamp=".venv/.requirements-$(sha1sum requirements-dev.txt | cut -c1-12)"
if [ ! -f "$stamp" ]; then
  echo "setup: installing Python packages"
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  .venv/bin/python -m pip install -q -r requirements-dev.txt
  rm -f .venv/.requirements-*
  touch "$stamp"
fi

echo "setup: building the vmlab extension (release)"
VIRTUAL_ENV="$PWD/.venv" PATH="$PWD/.venv/bin:$PATH" .venv/bin/maturin develop --release -q 2>&1 | grep -vE "^(📦|🔗|🐍|⚠️ +Warning: .*pip)" || true
.venv/bin/python -c "import vmlab; print('setup: vmlab', vmlab.__version__, 'ready')"
