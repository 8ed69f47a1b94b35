# The two commands (see README.md):
#   make demo   set up, then run the main job on built-in defaults
#   make test   set up, then run every test
# Targets that need the venv depend on `setup`, so `make -j` keeps the order.
.PHONY: setup demo test test-rust test-python bench pgo clean

# Every cargo build here is profile-guided (scripts/rustflags.sh; docs/performance.md,
# "Profile-guided builds"): the same flags as the extension's, so nothing builds twice.
export CARGO_ENCODED_RUSTFLAGS := $(shell scripts/rustflags.sh)

setup:
	./scripts/setup.sh

demo: setup
	.venv/bin/vmlab demo

test: test-rust test-python

# After setup: it installs valgrind and cc, which the live-tracing tests need, and
# clippy and rustfmt for the style checks (warnings are errors).
# vmlab-core only: vmlab-py is an extension module (no libpython to link a test binary
# against); the Python tests below exercise it. Built with the quick-to-build profile
# `test-release` (Cargo.toml): the same code, less optimised.
test-rust: setup
	cargo fmt --all --check
	cargo clippy -p vmlab-core -p vmlab-py -p vmlab-qemu --all-targets -- -D warnings
	cargo test -p vmlab-core -p vmlab-qemu --profile test-release

test-python: setup
	.venv/bin/python -m pytest -q tests/python

bench: setup
	.venv/bin/vmlab bench
	cargo bench -p vmlab-core

# Refresh pgo/vmlab.profdata.xz after changing a hot path.
pgo:
	./scripts/pgo.sh

clean:
	rm -rf .venv target
