# The two commands of the README: `make run` and `make test`. Both start with
# `make setup`, which fetches the engine and installs build prerequisites;
# `make test` also runs `test-setup`: the Python and Node clients the tests
# drive the server with, and the real peers some tests run beside it: Prometheus,
# Debian's InfluxDB 1.6 (`influxd`) for the line-protocol parity test, and Apache
# ZooKeeper, the Keeper of the cluster test's replicated tables; and Debian's
# Chromium, which the web UI's tests drive (with Playwright, from PyPI).

CARGO ?= cargo

.PHONY: setup toolchain test-setup run check test bench fuzz-setup fuzz-smoke fuzz

setup: toolchain
	./engine/fetch.sh

# The Rust that rust-toolchain.toml pins. Machines without internet cannot
# fetch it: where rustup has no toolchain of that name but the machine's
# stable is that release, stable is named so too (rustup's own `toolchain
# link` refuses a release's name).
TOOLCHAIN := $(shell sed -n 's/^channel = "\(.*\)"/\1/p' rust-toolchain.toml)
toolchain:
	@home="$${RUSTUP_HOME:-$$HOME/.rustup}/toolchains"; \
	host="$$(rustup run stable rustc -vV | sed -n 's/^host: //p')"; \
	test -e "$$home/$(TOOLCHAIN)-$$host" || \
	case "$$(rustup run stable rustc --version)" in \
	  "rustc $(TOOLCHAIN) "*) ln -s "$$home/stable-$$host" "$$home/$(TOOLCHAIN)-$$host" ;; \
	  *) echo "Rust $(TOOLCHAIN) (rust-toolchain.toml) is not installed, nor is it this machine's stable: rustup toolchain install $(TOOLCHAIN)" >&2; exit 1 ;; \
	esac

test-setup: setup
	@python3 -c "import influxdb_client, influxdb, pytest, grpc, grpc_tools, grpc_reflection, cryptography, pyarrow, clickhouse_connect, pandas, moto.server, playwright" 2>/dev/null || \
		python3 -m pip install -q -r tests/python/requirements.txt
	@.venv-otel/bin/python -c "import opentelemetry.exporter.prometheus_remote_write, opentelemetry.exporter.otlp.proto.grpc.metric_exporter, opentelemetry.exporter.otlp.proto.http.metric_exporter" 2>/dev/null || \
		(python3 -m venv .venv-otel && .venv-otel/bin/pip install -q -r tests/python/requirements-otel.txt)
	@./tests/apt-install.sh /usr/bin/npm npm
	@test -d tests/node/node_modules/@clickhouse/client || (cd tests/node && npm ci --no-audit --no-fund)
	@./tests/apt-install.sh /usr/bin/prometheus prometheus
	@./tests/apt-install.sh /usr/bin/prometheus-alertmanager prometheus-alertmanager
	@./tests/apt-install.sh /usr/bin/influxd influxdb
	@./tests/apt-install.sh /usr/share/zookeeper/bin/zkServer.sh zookeeper
	@./tests/apt-install.sh /usr/bin/chromium chromium

run: setup
	$(CARGO) run --release -p chingest-server -- serve

# The gate (docs/developing.md): formatting, lints as errors, licences and
# banned crates, the tidy invariants, the tests that need no engine at run
# time, and the web UI's syntax (its ES modules, read as modules from stdin:
# an older Node takes a file's .js as CommonJS). CI runs it first.
ENGINE_FREE = -p lineproto -p chingest-proto -p chingest-codecs -p tsbs -p chingest-influxql -p chingest-promql -p chingest-rules

check: setup
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	@command -v cargo-deny >/dev/null || $(CARGO) install --locked cargo-deny@0.20.2
	$(CARGO) deny check bans licenses sources
	$(CARGO) test -p tidy
	$(CARGO) test $(ENGINE_FREE)
	@./tests/apt-install.sh /usr/bin/node nodejs
	@for file in $$(find ui -name '*.js' | sort); do \
		node --check --input-type=module < $$file || { echo "ui: $$file does not parse" >&2; exit 1; }; \
	done

test: test-setup
	$(CARGO) test --workspace --all-targets
	$(CARGO) test --workspace --doc
	$(CARGO) build -p chingest-server
	python3 -m pytest -q tests/python

bench: setup
	$(CARGO) bench --workspace


# The fuzz targets (fuzz/; docs/developing.md): cargo fuzz (libFuzzer) on
# the nightly toolchain, without a sanitizer: the targets look for panics,
# overflows (debug assertions are on), allocations past a bound set by the
# input's size, and broken round trips, all of which Rust's own checks and
# the targets' asserts catch. `fuzz-smoke` (CI) runs each target briefly
# from its checked-in seeds and fails on any crash; `fuzz` runs each for
# FUZZ_SECONDS, keeping what it finds interesting in fuzz/corpus/.
FUZZ_TARGETS = $(shell sed -n 's/^name = "\(.*\)"/\1/p' fuzz/Cargo.toml | tail -n +2)
FUZZ_SMOKE_SECONDS ?= 8
FUZZ_SECONDS ?= 1800
FUZZ = cd fuzz && LD_LIBRARY_PATH=$(CURDIR)/engine/lib $(CARGO) +nightly fuzz

fuzz-setup: setup
	@rustup run nightly rustc --version >/dev/null 2>&1 || \
		{ echo "the fuzz targets need the nightly toolchain: rustup toolchain install nightly" >&2; exit 1; }
	@command -v cargo-fuzz >/dev/null || $(CARGO) install --locked cargo-fuzz@0.13.2
	$(FUZZ) build -s none

fuzz-smoke: fuzz-setup
	@for target in $(FUZZ_TARGETS); do \
		./fuzz/run.sh $$target $(FUZZ_SMOKE_SECONDS) || exit 1; \
	done

fuzz: fuzz-setup
	@for target in $(FUZZ_TARGETS); do \
		./fuzz/run.sh $$target $(FUZZ_SECONDS) || exit 1; \
	done
