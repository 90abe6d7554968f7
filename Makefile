# The two commands of the README: `make run` and `make test`. Both start with
# `make setup`, which fetches the engine, installs build prerequisites and
# the Python InfluxDB clients the tests drive the server with.

CARGO ?= cargo

.PHONY: setup run test bench clippy

setup:
	./engine/fetch.sh
	@python3 -c "import influxdb_client, influxdb, pytest, grpc, grpc_tools, grpc_reflection, cryptography, pyarrow" 2>/dev/null || \
		python3 -m pip install -q -r tests/python/requirements.txt
	@test -x .venv-promrw/bin/python || \
		(python3 -m venv .venv-promrw && .venv-promrw/bin/pip install -q -r tests/python/requirements-promrw.txt)

run: setup
	$(CARGO) run --release -p chingest-server -- serve

test: setup
	$(CARGO) test --workspace --all-targets
	$(CARGO) test --workspace --doc
	$(CARGO) build -p chingest-server
	python3 -m pytest -q tests/python

bench: setup
	$(CARGO) bench --workspace

clippy: setup
	$(CARGO) clippy --workspace --all-targets -- -D warnings
