# sidekick: health probes for MySQL / Percona XtraDB Cluster / MariaDB Galera and a Consul -> ProxySQL sync agent.
#
# `make help` lists every target with one line each (the `## ` comments below). Each target is
# defined once; what `make test` runs is its prerequisite list, in that order.

PREFIX ?= /usr/local
DESTDIR ?=
BUILD ?= build
BIN ?= bin
CC ?= cc
PKG_CONFIG ?= pkg-config
PYTHON ?= /usr/bin/python3
VERSION := $(shell cat VERSION 2>/dev/null || echo 0.1.0)

PKGS := libmariadb libconfig libmicrohttpd libcurl libcjson
WERROR ?= -Werror
# Option tables leave their last field (the settings field an option is bound to) out when it
# has none: zero is "not bound", so that one warning of -Wextra is off.
WARNINGS := -Wall -Wextra -Wno-missing-field-initializers -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2 -Wvla $(WERROR)
CFLAGS ?= -O2 -g
SAN ?=
ALL_CFLAGS := -std=c11 -D_GNU_SOURCE -DSIDEKICK_VERSION='"$(VERSION)"' $(WARNINGS) $(CFLAGS) $(SAN) -MMD -MP
# Recursive (=) on purpose: evaluated when a rule runs, so `make deps test` works on a machine
# where pkg-config and the -dev packages arrive with the deps step.
PKG_CFLAGS = $(shell $(PKG_CONFIG) --cflags $(PKGS))
PKG_LIBS = $(shell $(PKG_CONFIG) --libs $(PKGS))
CPPFLAGS += -Ilib -Ichecks -Isync $(PKG_CFLAGS)
LDLIBS += $(PKG_LIBS) -lpthread

LIB_SRC := lib/deadline.c lib/util.c lib/log.c lib/opt.c lib/secret.c lib/mycnf.c lib/statusmap.c lib/db.c \
	lib/http.c lib/consul.c lib/consul_config.c lib/consul_http.c lib/consul_listing.c lib/base64.c lib/proc.c \
	lib/dbauth.c \
	lib/trust.c \
	lib/cfgnum.c \
	lib/runfile.c lib/consul_login.c \
	lib/consul_acl.c lib/spooky.c \
	checks/galera.c checks/replica.c checks/sst.c checks/sst_proc.c checks/probe.c checks/probe_main.c \
	checks/readiness.c checks/cc_check.c checks/clustercheck_opts.c checks/healthcheck.c \
	checks/proxysql_verdict.c
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o)
LIBSK := $(BUILD)/libsidekick.a

SYNC_SRC := sync/model.c sync/layout.c sync/desired.c sync/plan.c sync/config.c sync/config_lists.c sync/config_check.c \
	sync/proxysql.c sync/shared.c sync/agent.c sync/watch.c sync/target.c sync/pass.c sync/known.c sync/cluster.c \
	sync/guard.c sync/report.c sync/metrics.c sync/lock.c sync/announce.c sync/module.c sync/patroni.c
SYNC_OBJ := $(SYNC_SRC:%.c=$(BUILD)/%.o)
LIBSYNC := $(BUILD)/libsync.a

# The probe binaries: dist/probes.list, the list the probes image and the tests read too.
PROBES := $(shell sed -e 's/\#.*//' dist/probes.list)
PROGRAMS := $(PROBES:%=$(BIN)/%) $(BIN)/proxysql-sync

UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)

.PHONY: all help print-probes test unit unit-asan integration deps build-deps deb demo demo-postgres lint install clean docs check-docs shape check-shape
all: $(PROGRAMS) ## build every binary into bin/

print-probes: ## the probe binaries' names, one a line (dist/probes.list)
	@printf '%s\n' $(PROBES)

help: ## this list
	@sed -n 's/^\([a-zA-Z0-9_.-]*\):.*## \(.*\)$$/\1\t\2/p' $(MAKEFILE_LIST) | \
		awk -F '\t' '{ printf "  make %-26s %s\n", $$1, $$2 }'

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	@$(CC) $(CPPFLAGS) $(ALL_CFLAGS) -c -o $@ $<

$(LIBSYNC): $(SYNC_OBJ)
	@rm -f $@
	@echo "  AR      $@"
	@$(AR) rcs $@ $^

$(LIBSK): $(LIB_OBJ)
	@rm -f $@
	@echo "  AR      $@"
	@$(AR) rcs $@ $^

# checks/liveness_check.c -> bin/liveness-check
$(BIN)/liveness-check: $(BUILD)/checks/liveness_check.o $(LIBSK)
$(BIN)/readiness-check: $(BUILD)/checks/readiness_check.o $(LIBSK)
$(BIN)/clustercheck: $(BUILD)/checks/clustercheck.o $(BUILD)/checks/register.o $(LIBSK)
$(BIN)/haproxy-check: $(BUILD)/checks/haproxy_check.o $(LIBSK)
$(BIN)/proxysql-check: $(BUILD)/checks/proxysql_check.o $(LIBSK)
$(BIN)/healthcheck: $(BUILD)/checks/healthcheck_main.o $(LIBSK)
$(BIN)/proxysql-sync: $(BUILD)/sync/main.o $(LIBSYNC) $(LIBSK)
$(PROGRAMS):
	@mkdir -p $(BIN)
	@echo "  LINK    $@"
	@$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $(filter %.o,$^) $(filter-out $(LIBSK),$(filter %.a,$^)) $(LIBSK) $(LDLIBS)

$(BUILD)/tests/%: tests/unit/%.c $(LIBSK)
	@mkdir -p $(dir $@)
	@echo "  LINK    $@"
	@$(CC) $(CPPFLAGS) $(ALL_CFLAGS) -o $@ $< $(filter %.a,$(filter-out $(LIBSK),$^)) $(LIBSK) $(LDLIBS) -lcmocka

# The sync unit tests link the agent's pure core too.
$(BUILD)/tests/test_sync $(BUILD)/tests/test_agent: $(LIBSYNC)

unit: $(UNIT_BIN) ## the C unit tests (cmocka, data files in tests/data)
	@set -e; for t in $(UNIT_BIN); do echo "== $$t"; SIDEKICK_TEST_DATA=tests/data $$t; done

# ",float-cast-overflow" when compiler $(1) has that sanitizer: a double out of an integer's range
# converted to it (a KV number like 1e300) is undefined behaviour, and GCC's -fsanitize=undefined
# leaves that check out. Evaluated only where used.
SAN_FLOAT_CAST = $(shell echo 'int main(void){return 0;}' | $(1) -fsanitize=float-cast-overflow -x c - -o /dev/null \
	2>/dev/null && echo ,float-cast-overflow)
UBSAN = -fsanitize=address,undefined$(call SAN_FLOAT_CAST,$(1)) -fno-omit-frame-pointer -fno-sanitize-recover=all

# The unit tests again, built with AddressSanitizer and UndefinedBehaviorSanitizer.
unit-asan: ## the unit tests under ASan+UBSan
	$(MAKE) --no-print-directory BUILD=build/asan SAN="$(call UBSAN,$(CC))" CFLAGS="-O1 -g" unit

# The integration suites against real MariaDB/Galera and the doubles; they run the static binaries
# and the images too (test_static.py, test_images.py), install the Debian packages into the images'
# debootstrapped root (test_packages.py), then the ProxySQL 3.0 run.
integration: all static images deb ## pytest tests/integration, then integration-proxysql-3.0
	$(INTEGRATION_ENV) SIDEKICK_BIN=$(CURDIR)/$(BIN) $(PYTHON) -m pytest -q --durations=25 tests/integration $(PYTEST_ARGS)
	$(MAKE) --no-print-directory integration-proxysql-3.0

# The sync suites (main, safety guards, services, faults, cluster) and proxysql-check again with the
# ProxySQL double playing ProxySQL 3.0's admin interface (docs/proxysql-double.md); about 5 minutes
# (left out, the same in both modes: the 30 s wait for the ping monitor's shun, the 40 s
# ProxySQL outage, whose restart-empty path test_sync.py's restart test covers in 3.0 too, and
# the tests of Consul's faults, where ProxySQL only receives what a good answer would bring).
PROXYSQL_3_0_SUITES = tests/integration/test_sync.py tests/integration/test_sync_safety.py \
	tests/integration/test_sync_services.py tests/integration/test_sync_faults.py \
	tests/integration/test_sync_cluster.py tests/integration/test_proxysql_check.py \
	tests/integration/test_proxysql_3_0.py
.PHONY: integration-proxysql-3.0
integration-proxysql-3.0: all ## the sync suites with the double playing ProxySQL 3.0
	SIDEKICK_BIN=$(CURDIR)/$(BIN) $(PYTHON) -m pytest -q --proxysql-double-version 3.0 $(PROXYSQL_3_0_SUITES) \
		-k "not test_readiness_shunned_writer_is_not_ready and not test_proxysql_down_40s_then_back_empty \
		and not test_consul_ and not test_no_leader_answers_back_off" \
		$(PYTEST_ARGS)

# Everything CI runs (.ci/run is `make deps test`), in this order.
test: lint check-docs check-shape unit unit-asan integration fuzz-test test-asan test-tsan ## every test (what CI runs)
# In `make test` the tests of tests/sanitized.list run once, against the ASan binaries (test-asan).
test: INTEGRATION_ENV = SIDEKICK_SANITIZED_ELSEWHERE=1

deps: ## install what the build and the tests need (Debian, apt; idempotent; a development machine only)
	@tests/deps.sh build test

build-deps: ## install only what make all, static and deb need (compilers, -dev packages; no server)
	@tests/deps.sh build

demo: all ## a local Galera cluster, the probes and proxysql-sync at work
	$(PYTHON) tests/demo.py

demo-postgres: all ## a real Patroni cluster's failover followed into ProxySQL's pgsql_servers
	$(PYTHON) tests/demo_postgres.py

lint: ## clang-format and banned-function check
	@tests/lint.sh

# The parameter bound: no function of more than SHAPE_MAX_PARAMS parameters (SHAPE_OVER_PARAMS
# of them allowed; `make shape` lists them; a callback whose parameters a library fixes is listed
# in tests/shape-exempt.txt).
SHAPE_MAX_PARAMS := 6
SHAPE_OVER_PARAMS := 0
shape: all ## function lengths and parameters, settings looked up by name, layers, call cycles (tests/shape.py)
	@$(PYTHON) tests/shape.py --build $(BUILD) --no-cycles --list --max-params $(SHAPE_MAX_PARAMS) \
		--max-over-params $(SHAPE_OVER_PARAMS)

check-shape: all ## no function over 50 lines or 6 parameters, no lookup by name at run time, no layer crossed, no cycle
	@$(PYTHON) tests/shape.py --self-test
	@$(PYTHON) tests/shape.py --build $(BUILD) --max-over 0 --max-lookups 0 \
		--max-params $(SHAPE_MAX_PARAMS) --max-over-params $(SHAPE_OVER_PARAMS)

docs: all ## regenerate docs/options from the option tables
	@tests/gen-docs.sh write

check-docs: all ## docs/options match the option tables
	@tests/gen-docs.sh check

install: all install-dist ## binaries, docs, systemd units and examples (PREFIX, DESTDIR)
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 0755 $(PROGRAMS) $(DESTDIR)$(PREFIX)/bin/
	ln -sf healthcheck $(DESTDIR)$(PREFIX)/bin/healthcheck.sh
	install -d $(DESTDIR)$(PREFIX)/share/doc/sidekick
	install -m 0644 README.md docs/*.md $(DESTDIR)$(PREFIX)/share/doc/sidekick/

# Debian packages sidekick-probes and proxysql-sync in build/deb/ (dist/deb/build.sh; docs/packages.md):
# the binaries built again in build/deb-build with Debian's hardening flags (dpkg-buildflags), about 15 s.
DEB_FLAGS = DEB_BUILD_MAINT_OPTIONS=hardening=+all dpkg-buildflags --get
deb: ## Debian packages in build/deb (sidekick-probes, proxysql-sync)
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/deb-build BIN=$(BUILD)/deb-build/bin \
		CFLAGS="$$($(DEB_FLAGS) CFLAGS) $$($(DEB_FLAGS) CPPFLAGS)" LDFLAGS="$$($(DEB_FLAGS) LDFLAGS)" all
	@dist/deb/build.sh $(BUILD)/deb-build/bin $(BUILD)/deb $(VERSION)

clean: ## remove build/ and bin/
	rm -rf $(BUILD) $(BIN)

# Fully static binaries in bin/static/ (musl; the libraries Debian cannot link statically are
# built from Debian's source packages into build/static/, cached): see docs/deploy.md.
STATIC_DIR := build/static
.PHONY: static
static: ## fully static musl binaries in bin/static
	@containers/static/build-deps.sh $(STATIC_DIR)
	@PKG_CONFIG_LIBDIR=$(CURDIR)/$(STATIC_DIR)/prefix/lib/pkgconfig $(MAKE) --no-print-directory \
		BUILD=$(STATIC_DIR)/obj BIN=$(BIN)/static CC=musl-gcc PKG_CONFIG="$(PKG_CONFIG) --static" \
		CFLAGS=-O2 LDFLAGS="-static -s -Wl,--gc-sections" all $(BIN)/static/copy-probes


# The probes image's init-container copier (containers/probes/copy-probes.c); no library needed.
$(BIN)/copy-probes: containers/probes/copy-probes.c
	@mkdir -p $(BIN)
	@echo "  LINK    $@"
	@$(CC) $(filter-out -MMD -MP,$(ALL_CFLAGS)) $(LDFLAGS) -o $@ $<

# Bare-metal files from dist/: the systemd units and drop-ins into SYSTEMDUNITDIR (installed, not enabled);
# the xinetd entry, the cron file and an agent configuration as examples to copy into /etc.
SYSTEMDUNITDIR ?= $(PREFIX)/lib/systemd/system
EXAMPLEDIR = $(PREFIX)/share/doc/sidekick/examples
DIST_SED = sed -e 's|@BINDIR@|$(PREFIX)/bin|g' -e 's|@DOCDIR@|$(PREFIX)/share/doc/sidekick|g'
.PHONY: install-dist
install-dist: ## only the bare-metal files of dist/
	install -d $(DESTDIR)$(SYSTEMDUNITDIR) $(DESTDIR)$(EXAMPLEDIR)
	for f in dist/systemd/*.service dist/systemd/*.socket; do \
		$(DIST_SED) $$f >$(DESTDIR)$(SYSTEMDUNITDIR)/$${f##*/} || exit 1; done
	for d in dist/systemd/*.d; do install -d $(DESTDIR)$(SYSTEMDUNITDIR)/$${d##*/} && \
		for f in $$d/*.conf; do $(DIST_SED) $$f >$(DESTDIR)$(SYSTEMDUNITDIR)/$${d##*/}/$${f##*/} || exit 1; done; done
	$(DIST_SED) dist/xinetd/mysqlchk >$(DESTDIR)$(EXAMPLEDIR)/xinetd-mysqlchk
	$(DIST_SED) dist/cron/sidekick >$(DESTDIR)$(EXAMPLEDIR)/cron-sidekick
	install -m 0644 dist/config/proxysql-sync.conf $(DESTDIR)$(EXAMPLEDIR)/

# libFuzzer harnesses (tests/fuzz/fuzz_*.c), clang with ASan and UBSan, in build/fuzz/bin/.
# `make fuzz` runs each for FUZZ_SECONDS and replays tests/fuzz/regressions (docs/reliability.md).
FUZZ_SAN = -fsanitize=fuzzer-no-link,address,undefined$(call SAN_FLOAT_CAST,clang) -fno-sanitize-recover=all \
	-fno-omit-frame-pointer
FUZZ_NAMES := $(patsubst tests/fuzz/%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_SECONDS ?= 8
.PHONY: fuzz fuzz-build
fuzz-build: ## build the libFuzzer harnesses (clang)
	@$(MAKE) --no-print-directory BUILD=build/fuzz CC=clang SAN="$(FUZZ_SAN)" CFLAGS="-O1 -g" \
		$(FUZZ_NAMES:%=build/fuzz/bin/%)

$(BUILD)/bin/fuzz_%: tests/fuzz/fuzz_%.c $(LIBSYNC) $(LIBSK)
	@mkdir -p $(dir $@)
	@echo "  LINK    $@"
	@$(CC) $(CPPFLAGS) $(ALL_CFLAGS) -fsanitize=fuzzer -o $@ $< $(LIBSYNC) $(LIBSK) $(LDLIBS)

fuzz: fuzz-build ## every fuzzer for FUZZ_SECONDS, then the regressions
	@tests/fuzz/run.sh $(FUZZ_SECONDS)

# The integration suites that need no fault hook of their own against ASan+UBSan binaries
# (build/asan-int/bin); any sanitizer report fails the run. valgrind: the agent for 200 sync
# cycles and the probes under memcheck. soak: 3000 KV changes and 200 ProxySQL restarts, RSS and
# descriptors sampled (about 6 minutes; not part of make test). See docs/reliability.md.
ASAN_INT = BUILD=build/asan-int BIN=build/asan-int/bin CFLAGS="-O1 -g" SAN="$(call UBSAN,$(CC))"
.PHONY: test-asan valgrind soak
test-asan: ## integration suites against ASan+UBSan binaries
	@$(MAKE) --no-print-directory $(ASAN_INT) all
	@tests/sanitize.sh build/asan-int/bin $(PYTEST_ARGS)

valgrind: all ## the agent and the probes under valgrind memcheck
	@SIDEKICK_BIN=$(CURDIR)/$(BIN) $(PYTHON) tests/soak/soak.py --valgrind

soak: all ## 3000 KV changes and 200 ProxySQL restarts (about 6 minutes)
	@SIDEKICK_BIN=$(CURDIR)/$(BIN) $(PYTHON) tests/soak/soak.py

# The probes against their shell baseline, clustercheck --listen and the agent's health port
# under a bounded load, and the sync agent against the doubles, in one run (about 5 minutes);
# one Markdown report. Larger runs: make bench BENCH_ARGS="--runs 500 --requests 50000".
.PHONY: bench
bench: all ## every benchmark; Markdown report in build/bench/report.md
	@SIDEKICK_BIN=$(CURDIR)/$(BIN) $(PYTHON) tests/bench/report.py --out $(BUILD)/bench/report.md $(BENCH_ARGS)

# ThreadSanitizer (build/tsan): the unit tests, then the agent's integration suites and a soak with
# /metrics and /readyz scraped throughout; any report fails the run (tests/tsan.supp says what is
# suppressed and why). About 4 minutes; docs/reliability.md.
TSAN := BUILD=build/tsan BIN=build/tsan/bin CFLAGS="-O1 -g" SAN="-fsanitize=thread -fno-omit-frame-pointer"
.PHONY: unit-tsan test-tsan
unit-tsan: ## the unit tests under ThreadSanitizer
	@TSAN_OPTIONS="halt_on_error=1:suppressions=$(CURDIR)/tests/tsan.supp" $(MAKE) --no-print-directory $(TSAN) unit
test-tsan: unit-tsan ## unit tests, agent suites and a soak under ThreadSanitizer
	@$(MAKE) --no-print-directory $(TSAN) all
	@SANITIZER=thread tests/sanitize.sh build/tsan/bin $(PYTEST_ARGS)

.PHONY: fuzz-test
fuzz-test: fuzz-build ## a short fuzzing round, 4 s a harness
	@tests/fuzz/run.sh 4

# Container images sidekick-probes and sidekick-sync (containers/*/Dockerfile), built with
# buildah from a local debootstrapped Debian base into build/images/ (docs/deploy.md).
.PHONY: images
images: static ## the FROM scratch images sidekick-probes and sidekick-sync
	@containers/build-images.sh
-include $(LIB_OBJ:.o=.d) $(SYNC_OBJ:.o=.d) $(BUILD)/sync/main.d $(BUILD)/checks/*.d $(wildcard $(BUILD)/bin/fuzz_*.d)
