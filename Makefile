# logbox — top-level entry points. This file only descends and orchestrates; each C folder has
# its own plain Makefile. See README.md.
#
#   make install  build, then install into $(DESTDIR) (appliance/install.sh; default /)
#   make run     install what is missing, build, start the appliance locally (foreground)
#   make test    install what is missing, build, run every test suite
#   make bench   benchmarks (not tests): figures side by side with a baseline
#   make bench-ingest   the end-to-end ingest benchmark alone (tests/bench/ingest_e2e.py):
#                       logbox, syslog-ng file() and VictoriaLogs side by side (~15 min);
#                       BENCH_QUICK=1 (or make bench-ingest-quick): one run of fewer loads (~3 min);
#                       BENCH_ARGS="..." passes options (e.g. --only replay)
#   make bench-search   the search benchmark alone (tests/bench/search.py); SEARCH_ARGS="..."
#                       passes options (e.g. --baseline OLD/build/bin: issue 18's old-vs-new)
#   make bench-size     the size benchmark alone (tests/bench/size.py): logbox, VictoriaLogs and
#                       zstd -3 on three ~50 MB corpora (~3 min); BENCH_ARGS="..." passes options
#                       (e.g. --baseline OLD/logbox --runs 1 --mb 150)
#   make bench-integrity  the integrity benchmark alone (tests/bench/integrity.py): ingest with
#                       chains and seals against the build before them, verify --integrity, the
#                       day's end and a seal, on ~50 MB corpora; BENCH_ARGS="..." passes options
#                       (e.g. --corpora "" --day-msgs 20000000: one day of 20 M messages alone,
#                       its ingest, end, seal and verify timed, ~5 min on 2 cores; ~2.6 GB of
#                       lines written and removed, a ~1.3 GB store in build/bench/integrity/day)
#   make bench-rpc      the RPC API benchmark alone (tests/bench/rpc.py)
#   make bench-webui    the web UI benchmark alone (tests/bench/webui.py, headless Chromium)
#   make bench-tail     live tail latency alone (tests/bench/tail_latency.py): send to a
#                       /v1/tail line at 100,000 msg/s, p50/p99; BENCH_ARGS="--rate N ..."
#   make bench-archive  the archive benchmark alone (tests/bench/archive.py): upload, verify and
#                       restore of closed days against a real SeaweedFS, beside boto3's own
#                       upload; BENCH_ARGS="--days N --msgs-per-day M ..."
#   make bench-archive-search  search over archived days alone (tests/bench/archive_search.py):
#                       a one-token search, a count and a histogram over 7 archived days, cold
#                       cache and warm, against the same days local; 20,000,000 messages by
#                       default (LOGBOX_BENCH_ARCHIVE_SEARCH_N=N fewer); BENCH_ARGS="..."
#   make bench-federation  the federation benchmark alone (tests/bench/federation.py): three
#                       sites and one box holding all their messages (each started like make
#                       run), queries on the box's own logspace against the multiple logspace
#                       over the sites; BENCH_ARGS="--msgs N" (3,000,000 by default)
#   make bench-eps      the logbox-eps benchmark alone (tests/bench/eps.py): its sender beside
#                       loggen (TCP, TLS, UDP), then a sample report against make run
#   make fuzz    fuzz targets at length (make test runs them briefly)
#   make image   the bootable appliance disk image, build/image/logbox.img(.zst) (image/README.md)
#   make test-image  build the image, boot it under qemu and test it (tests/test_image.py;
#                make test runs the same test inside its pytest run)

LOGBOX_DATA ?= $(CURDIR)/var
VENV        := $(CURDIR)/.venv
PY          := $(VENV)/bin/python
export LOGBOX_DATA

.PHONY: all deps build install run test test-c test-py lint bench bench-alerts bench-integrity bench-ingest bench-ingest-quick \
	bench-search bench-size bench-archive bench-archive-search bench-federation bench-rpc bench-webui bench-eps bench-tail fuzz image test-image clean

all: build

deps:
	@sh appliance/deps.sh

build:
	@$(MAKE) --no-print-directory -C indexer

install: build
	sh appliance/install.sh "$(DESTDIR)"

run:
	@$(MAKE) --no-print-directory deps
	@$(MAKE) --no-print-directory build
	@$(PY) appliance/devrun.py

# SeaweedFS (the archive tests' object store, tests/seaweedfs.sh) builds while the C tests run:
# a few minutes of Go compiling the first time, on the core those leave free.
test:
	@$(MAKE) --no-print-directory deps
	@$(MAKE) --no-print-directory build
	@$(MAKE) --no-print-directory lint
	@mkdir -p build; sh tests/seaweedfs.sh >build/seaweedfs.log 2>&1 & w=$$!; \
	$(MAKE) --no-print-directory test-c; rc=$$?; \
	if ! wait $$w; then cat build/seaweedfs.log; exit 1; fi; cat build/seaweedfs.log; exit $$rc
	@$(MAKE) --no-print-directory test-py

test-c:
	@$(MAKE) --no-print-directory -C indexer check

test-py:
	@$(PY) -m pytest -q tests

lint:
	@$(VENV)/bin/ruff check --quiet appliance collector rpc webui tests
	@$(VENV)/bin/ruff format --check --quiet appliance collector rpc webui tests

bench:
	@$(MAKE) --no-print-directory deps
	@$(MAKE) --no-print-directory build
	@$(PY) tests/bench/run.py
	@$(PY) tests/bench/size.py
	@$(PY) tests/bench/ingest_e2e.py
	@$(PY) tests/bench/search.py
	@$(PY) tests/bench/rpc.py
	@$(PY) tests/bench/webui.py
	@$(PY) tests/bench/integrity.py
	@$(PY) tests/bench/eps.py
	@sh tests/seaweedfs.sh
	@$(PY) tests/bench/archive.py
	@$(PY) tests/bench/archive_search.py
	@$(PY) tests/bench/federation.py

bench-eps:
	@$(MAKE) --no-print-directory deps
	@$(MAKE) --no-print-directory build
	@$(PY) tests/bench/eps.py $(BENCH_ARGS)

bench-integrity:
	@$(MAKE) --no-print-directory deps
	@$(MAKE) --no-print-directory build
	@$(PY) tests/bench/integrity.py $(BENCH_ARGS)

bench-ingest:
	@$(MAKE) --no-print-directory deps
	@$(MAKE) --no-print-directory build
	@$(PY) tests/bench/ingest_e2e.py $(BENCH_ARGS)

bench-ingest-quick:
	@$(MAKE) --no-print-directory bench-ingest BENCH_QUICK=1

bench-search:
	@$(MAKE) --no-print-directory deps
	@$(MAKE) --no-print-directory build
	@$(PY) tests/bench/search.py $(SEARCH_ARGS)

bench-size:
	@$(MAKE) --no-print-directory deps
	@$(MAKE) --no-print-directory build
	@$(PY) tests/bench/size.py $(BENCH_ARGS)

bench-archive:
	@$(MAKE) --no-print-directory deps
	@$(MAKE) --no-print-directory build
	@sh tests/seaweedfs.sh
	@$(PY) tests/bench/archive.py $(BENCH_ARGS)

bench-archive-search:
	@$(MAKE) --no-print-directory deps
	@$(MAKE) --no-print-directory build
	@sh tests/seaweedfs.sh
	@$(PY) tests/bench/archive_search.py $(BENCH_ARGS)

bench-federation:
	@$(MAKE) --no-print-directory deps
	@$(MAKE) --no-print-directory build
	@$(PY) tests/bench/federation.py $(BENCH_ARGS)

bench-alerts:
	@$(MAKE) --no-print-directory deps
	@$(MAKE) --no-print-directory build
	@$(PY) tests/bench/alerts.py $(BENCH_ARGS)

bench-rpc:
	@$(MAKE) --no-print-directory deps
	@$(MAKE) --no-print-directory build
	@$(PY) tests/bench/rpc.py

bench-webui:
	@$(MAKE) --no-print-directory deps
	@$(MAKE) --no-print-directory build
	@$(PY) tests/bench/webui.py

bench-tail:
	@$(MAKE) --no-print-directory deps
	@$(MAKE) --no-print-directory build
	@$(PY) tests/bench/tail_latency.py $(BENCH_ARGS)

fuzz:
	@$(MAKE) --no-print-directory deps
	@$(MAKE) --no-print-directory -C indexer fuzz FUZZ_SECONDS=$${FUZZ_SECONDS:-300}

image:
	@$(MAKE) --no-print-directory deps
	@$(MAKE) --no-print-directory build
	@python3 image/build.py

test-image: image
	@LOGBOX_IMAGE=$(CURDIR)/build/image/logbox.img $(PY) -m pytest -q -rs tests/test_image.py

clean:
	@$(MAKE) --no-print-directory -C indexer clean
	rm -rf build
