#!/usr/bin/env bash
# Check that the source distribution installs where nothing of this checkout is: build it
# (`maturin sdist`), `pip install` it into a fresh virtualenv in a temporary directory (pip
# builds the extension from the sdist's sources with the machine's Rust toolchain: 10+
# minutes on 2 cores), run `vmlab demo --quick` from that virtualenv, and check that the
# plain install did not pull in Ray while the `ray` extra would (pip's dry-run resolution
# of `SDIST[ray]`). Needs the network access pip and cargo need (PyPI, crates.io).
#
# Not part of `make test` (too slow); tests/python/test_build.py checks the sdist's
# contents. Run after `scripts/setup.sh` (it installs maturin into .venv). A persistent
# CARGO_TARGET_DIR makes re-runs faster; the build ignores the checkout's profile-guided
# flags (scripts/rustflags.sh), as a user's would.
set -euo pipefail
cd "$(dirname "$0")/.."

PY="${PYTHON:-python3}"
MATURIN=.venv/bin/maturin
[ -x "$MATURIN" ] || { echo "check_sdist: error: $MATURIN missing: run scripts/setup.sh first" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vmlab-sdist.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "check_sdist: FAIL: $*" >&2; exit 1; }
# Run a step quietly; on failure show its output.
quiet() {
    local log="$tmp/step.log"
    "$@" >"$log" 2>&1 || { cat "$log" >&2; fail "$*"; }
}

echo "check_sdist: building the sdist"
quiet "$MATURIN" sdist -o "$tmp/dist"
sdists=("$tmp"/dist/vmlab-*.tar.gz)
[ ${#sdists[@]} -eq 1 ] && [ -f "${sdists[0]}" ] || fail "maturin sdist wrote no single vmlab-*.tar.gz"
sdist="${sdists[0]}"

echo "check_sdist: a fresh venv; pip install $(basename "$sdist") (builds the extension: 10+ minutes)"
"$PY" -m venv "$tmp/venv"
vpy="$tmp/venv/bin/python"
# From the temporary directory, so nothing can import the checkout's python/vmlab; without
# the checkout's build flags and virtualenv.
cd "$tmp"
unset CARGO_ENCODED_RUSTFLAGS RUSTFLAGS VIRTUAL_ENV PYTHONPATH
quiet "$vpy" -m pip install --disable-pip-version-check "$sdist"

echo "check_sdist: vmlab demo --quick"
"$tmp/venv/bin/vmlab" demo --quick >"$tmp/demo.txt" 2>"$tmp/demo.err" || { cat "$tmp/demo.txt" "$tmp/demo.err" >&2; fail "vmlab demo --quick"; }
tail -n 1 "$tmp/demo.txt"
grep -Eq '^[0-9]+ runs in ' "$tmp/demo.txt" || fail "vmlab demo --quick printed no summary line"
[ ! -s "$tmp/demo.err" ] || { cat "$tmp/demo.err" >&2; fail "vmlab demo --quick wrote to stderr"; }
# The installed package is the sdist's, not the checkout's.
where=$("$vpy" -c 'import vmlab, os; print(os.path.dirname(vmlab.__file__))')
case "$where" in "$tmp/venv/"*) ;; *) fail "vmlab imported from $where, not the fresh venv";; esac

echo "check_sdist: the plain install has no Ray; the [ray] extra resolves it"
"$vpy" -m pip --disable-pip-version-check list --format=json >"$tmp/installed.json"
"$vpy" - "$tmp/installed.json" <<'EOF' || fail "the plain install pulled in Ray"
import json, sys
names = {p["name"].lower() for p in json.load(open(sys.argv[1]))}
assert "vmlab" in names, names
sys.exit(1 if "ray" in names else 0)
EOF
quiet "$vpy" -m pip --disable-pip-version-check install --dry-run --quiet --report "$tmp/ray.json" "$sdist[ray]"
"$vpy" - "$tmp/ray.json" <<'EOF' || fail "pip install 'SDIST[ray]' would not install Ray"
import json, sys
report = json.load(open(sys.argv[1]))
names = {i["metadata"]["name"].lower() for i in report["install"]}
print("check_sdist: [ray] would add", ", ".join(sorted(names)))
sys.exit(0 if "ray" in names else 1)
EOF
echo "check_sdist: OK"
