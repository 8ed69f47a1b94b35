# The two commands (see README.md):
#   make demo   set up, then run the main job on built-in defaults
#   make test   set up, then run every test
.PHONY: setup demo test test-rust test-python bench clean

setup:
	./scripts/setup.sh

demo: setup
	.venv/bin/vmlab demo

test: setup test-rust test-python

test-rust:
	cargo test -p vmlab-core --release

test-python:
	.venv/bin/python -m pytest -q tests/python

bench: setup
	.venv/bin/vmlab bench
	cargo bench -p vmlab-core

clean:
	rm -rf .venv target
