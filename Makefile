# The two commands (see README.md):
#   make demo   set up, then run the main job on built-in defaults
#   make test   set up, then run every test
# Targets that need the venv depend on `setup`, so `make -j` keeps the order.
.PHONY: setup setup-system setup-base setup-tests demo test test-rust test-python bench pgo clean

# Every cargo build here is profile-guided (scripts/rustflags.sh; docs/performance.md,
# "Profile-guided builds"): the same flags as the extension's, so nothing builds twice.
export CARGO_ENCODED_RUSTFLAGS := $(shell scripts/rustflags.sh)

setup: setup-base
	./scripts/setup.sh

# System packages and toolchain components: what the Rust tests need.
setup-system:
	./scripts/setup.sh --system

# Those, the venv and its pinned packages: no extension.
setup-base: setup-system
	./scripts/setup.sh --base

# `setup` with the extension and the plugin built as the Rust tests are (`test-release`):
# about half the release build's time, debug assertions on. `make demo` (or `make setup`)
# builds the release extension back.
setup-tests: setup-base
	./scripts/setup.sh --tests

demo: setup
	.venv/bin/vmlab demo

# Two jobs: the Rust tests build and run while the extension builds, then the Python
# tests. Each command's output is printed whole when it ends (--output-sync=line), so the
# two logs do not interleave.
test:
	$(MAKE) -j2 --output-sync=line test-rust test-python

# After setup-system: it installs valgrind and cc, which the live-tracing tests need, and
# clippy and rustfmt for the style checks (warnings are errors).
# vmlab-core only: vmlab-py is an extension module (no libpython to link a test binary
# against); the Python tests below exercise it. Built with the quick-to-build profile
# `test-release` (Cargo.toml): the same code, less optimised. MAKEFLAGS is cleared for
# the tests: make keeps its jobserver's descriptors from a recipe it does not mark
# recursive, and rustdoc (the doc-tests) would warn that it cannot open them.
test-rust: setup-system
	cargo fmt --all --check
	cargo clippy -p vmlab-core -p vmlab-py -p vmlab-qemu -p vmlab-bench --all-targets -- -D warnings
	MAKEFLAGS= cargo test -p vmlab-core -p vmlab-qemu --profile test-release

test-python: setup-tests
	.venv/bin/python -m pytest -q --durations=15 tests/python

bench: setup
	.venv/bin/vmlab bench
	cargo bench -p vmlab-bench

# Refresh pgo/vmlab.profdata.xz after changing a hot path.
pgo:
	./scripts/pgo.sh

clean:
	rm -rf .venv target
