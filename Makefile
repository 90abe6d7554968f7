# The two commands of the README: `make run` and `make test`. Both start with
# `make setup`, which fetches the engine, installs build prerequisites,
# the Python InfluxDB clients the tests drive the server with, and Debian's
# InfluxDB 1.6 (`influxd`), which the line-protocol parity test runs beside
# the server.

CARGO ?= cargo

.PHONY: setup run test bench clippy

setup:
	./engine/fetch.sh
	@python3 -c "import influxdb_client, influxdb, pytest, grpc, grpc_tools, grpc_reflection, cryptography, pyarrow" 2>/dev/null || \
		python3 -m pip install -q -r tests/python/requirements.txt
	@test -x .venv-promrw/bin/python || \
		(python3 -m venv .venv-promrw && .venv-promrw/bin/pip install -q -r tests/python/requirements-promrw.txt)
	@# The package's scripts would start influxd as a service (on 8086, the
	@# server's own port) and enable it at boot: a policy-rc.d that forbids
	@# starting services is in place while it installs (unless one already
	@# is), and the boot-time service is disabled. The test runs its own.
	@test -x /usr/bin/influxd || { \
		sudo=; [ "$$(id -u)" -eq 0 ] || sudo=sudo; \
		echo "setup: installing influxdb (Debian's InfluxDB 1.6)" >&2; \
		policy=/usr/sbin/policy-rc.d; own=; \
		if [ ! -e $$policy ]; then \
			printf '#!/bin/sh\nexit 101\n' | $$sudo tee $$policy >/dev/null && $$sudo chmod +x $$policy && own=1; \
		fi; \
		$$sudo apt-get update -qq && \
		$$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq influxdb >/dev/null; \
		status=$$?; \
		[ -z "$$own" ] || $$sudo rm -f $$policy; \
		[ $$status -eq 0 ] || exit $$status; \
		if [ -d /run/systemd/system ]; then $$sudo systemctl disable --now influxdb.service >/dev/null 2>&1; fi; \
		if command -v update-rc.d >/dev/null; then $$sudo update-rc.d influxdb disable >/dev/null 2>&1; fi; \
		test -x /usr/bin/influxd; \
	}

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
