#!/usr/bin/env bash
# Set up everything vmlab needs on a fresh Debian machine of this kind: system packages,
# a project-local virtualenv with pinned Python packages, and the Rust extension built
# into it. Idempotent: re-runs only what changed.
#
#   scripts/setup.sh          everything, the extension and the plugin built `release`
#   scripts/setup.sh --system the system packages and the toolchain's components only
#                             (what the Rust tests need)
#   scripts/setup.sh --base   everything but the extension and the QEMU plugin
#   scripts/setup.sh --tests  everything, the extension and the plugin built with the
#                             tests' profile `test-release` (`make test`; quick to build,
#                             debug assertions on: not for measuring speed)
set -euo pipefail
cd "$(dirname "$0")/.."
stage=all
profile=release
case "${1-}" in
  "") ;;
  --system) stage=system ;;
  --base) stage=base ;;
  --tests) profile=test-release ;;
  *) echo "setup: error: unknown option '$1' (usage: scripts/setup.sh [--system | --base | --tests])" >&2; exit 2 ;;
esac

PY="${PYTHON:-python3}"
command -v "$PY" >/dev/null 2>&1 || { echo "setup: error: $PY not found (need Python >= 3.11)" >&2; exit 1; }
command -v cargo >/dev/null 2>&1 || { echo "setup: error: cargo not found (install Rust: https://rustup.rs)" >&2; exit 1; }
# The test command checks formatting and lints.
if command -v rustup >/dev/null 2>&1; then
    for c in clippy rustfmt; do
        rustup component list --installed 2>/dev/null | grep -q "^$c" || rustup component add "$c" >/dev/null
    done
fi

# System packages: valgrind and QEMU user mode (live tracing, real-trace tests), a C
# toolchain (Rust links with cc), chromium (the report test renders the HTML headless), and
# venv support where Debian's python3 ships without it.
need_apt=()
command -v valgrind >/dev/null 2>&1 || need_apt+=(valgrind)
command -v cc >/dev/null 2>&1 || need_apt+=(gcc)
# QEMU user mode: `vmlab trace`'s fast engine (docs/importers.md, "The QEMU engine").
if [ "$(uname -m)" = x86_64 ]; then command -v qemu-x86_64 >/dev/null 2>&1 || need_apt+=(qemu-user); fi
# Headless chromium: tests/python/test_report.py checks `vmlab report`'s page loads every image.
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
if [ ! -x .venv/bin/python ] && ! "$PY" -c "import ensurepip, venv" >/dev/null 2>&1; then
  need_apt+=("python3-venv")
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing ${need_apt[*]} (apt-get)"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo "setup: error: need root (or sudo) to install ${need_apt[*]}" >&2; exit 1; }
    SUDO="sudo"
  fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if [ "$stage" = system ]; then
  exit 0
fi

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PY" -m venv .venv
fi
# Keyed on the pins: editing requirements-dev.txt reinstalls, nothing else does.
stamp=".venv/.requirements-$(sha1sum requirements-dev.txt | cut -c1-12)"
if [ ! -f "$stamp" ]; then
  echo "setup: installing pinned Python packages"
  .venv/bin/python -m pip install -q --disable-pip-version-check -r requirements-dev.txt
  rm -f .venv/.requirements-*
  touch "$stamp"
fi

if [ "$stage" = base ]; then
  exit 0
fi

# Always ask: cargo rebuilds only what changed (a no-op build takes a few seconds).
# Profile-guided, with the flags `make test` builds with (scripts/rustflags.sh).
export CARGO_ENCODED_RUSTFLAGS="${CARGO_ENCODED_RUSTFLAGS-$(scripts/rustflags.sh)}"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# The QEMU tracing plugin, beside the package that loads it (python/vmlab/cli.py). First:
# it builds in seconds, and under `make test` the Rust tests' build, which shares its
# target directory, would otherwise hold cargo's lock by the time the extension is done.
if ! cargo build --profile "$profile" -q -p vmlab-qemu >"$log" 2>&1; then
  cat "$log" >&2
  echo "setup: error: building the QEMU tracing plugin failed (output above)" >&2
  exit 1
fi
cp "target/$profile/libvmlab_qemu.so" python/vmlab/libvmlab_qemu.so
echo "setup: building the vmlab extension ($profile; a few minutes the first time)"
if ! VIRTUAL_ENV="$PWD/.venv" PATH="$PWD/.venv/bin:$PATH" .venv/bin/maturin develop --profile "$profile" >"$log" 2>&1; then
  cat "$log" >&2
  echo "setup: error: building the extension failed (output above)" >&2
  exit 1
fi
.venv/bin/python -c "import vmlab; print('setup: vmlab', vmlab.__version__, '($profile build) ready in .venv')"
