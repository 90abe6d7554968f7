# The two commands of the README: `make run` and `make test`. Both start with
# `make setup`, which fetches the engine, installs build prerequisites, the
# Python InfluxDB clients the tests drive the server with and Prometheus.

CARGO ?= cargo

.PHONY: setup run test bench clippy

setup:
	./engine/fetch.sh
	@python3 -c "import influxdb_client, influxdb, pytest, grpc, grpc_tools, grpc_reflection, cryptography, pyarrow" 2>/dev/null || \
		python3 -m pip install -q -r tests/python/requirements.txt
	@.venv-otel/bin/python -c "import opentelemetry.exporter.prometheus_remote_write, opentelemetry.exporter.otlp.proto.grpc.metric_exporter, opentelemetry.exporter.otlp.proto.http.metric_exporter" 2>/dev/null || \
		(python3 -m venv .venv-otel && .venv-otel/bin/pip install -q -r tests/python/requirements-otel.txt)
# A real Prometheus for tests/python/test_prometheus.py, which starts its
# own: a policy-rc.d that refuses (unless one is already in place) keeps the
# package's postinst from starting the service.
	@if [ ! -x /usr/bin/prometheus ]; then \
		sudo=""; [ "$$(id -u)" -eq 0 ] || sudo=sudo; \
		policy=""; \
		if [ ! -e /usr/sbin/policy-rc.d ]; then \
			policy=/usr/sbin/policy-rc.d; \
			printf '#!/bin/sh\nexit 101\n' | $$sudo tee $$policy >/dev/null && $$sudo chmod 755 $$policy || exit 1; \
		fi; \
		echo "setup: installing prometheus" >&2; \
		$$sudo apt-get update -qq && \
		$$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null; \
		status=$$?; \
		[ -z "$$policy" ] || $$sudo rm -f $$policy; \
		exit $$status; \
	fi

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
