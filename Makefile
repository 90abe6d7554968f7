# The two commands of the README: `make run` and `make test`. Both start with
# `make setup`, which fetches the engine and installs build prerequisites.

CARGO ?= cargo

.PHONY: setup run test bench clippy

setup:
	./engine/fetch.sh

run: setup
	$(CARGO) run --release -p chingest-examples --example quickstart

test: setup
	$(CARGO) test --workspace --all-targets
	$(CARGO) test --workspace --doc

bench: setup
	$(CARGO) bench --workspace

clippy: setup
	$(CARGO) clippy --workspace --all-targets -- -D warnings
