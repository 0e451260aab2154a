#!/bin/sh
# Integration tests against binaries built with AddressSanitizer and UndefinedBehaviorSanitizer,
# or with ThreadSanitizer (SANITIZER=thread).
#
#   tests/sanitize.sh BINDIR [PYTEST ARGS...]                  (make test-asan builds BINDIR first)
#   SANITIZER=thread tests/sanitize.sh BINDIR [PYTEST ARGS...]  (make test-tsan)
#
# Every sanitizer report goes to its own file in a fresh directory (log_path), whatever the test
# does with the process's output, and a reporting process exits 86 (ASan, LSan at exit) or aborts
# (UBSan), so the test that ran it fails too. After pytest the script fails when any report file
# exists or pytest's output mentions a report, and prints the reports. Without PYTEST ARGS it runs
# the tests of tests/sanitized.list (the sync agent's suites, --register, proxysql-check,
# clustercheck --listen, healthcheck and a subset of the probe tests; `make test` runs them here
# only), then a short soak of the agent (SANITIZE_NO_SOAK=1: none); docs/reliability.md.
# ThreadSanitizer: a report makes the process exit 66 at the end (it goes on running meanwhile, so
# one run reports every race); without PYTEST ARGS it runs the agent's suites that fit in about
# three minutes (the threads: watchers, coordinator, targets, cluster lock, announce, health port),
# then the soak with /metrics and /readyz scraped every 50 ms.
set -u
cd "$(dirname "$0")/.."
bindir=${1:?usage: tests/sanitize.sh BINDIR [PYTEST ARGS...]}
shift
case $bindir in /*) ;; *) bindir=$PWD/$bindir ;; esac
python=${PYTHON:-/usr/bin/python3}

san=${SANITIZER:-address}
if [ $# -eq 0 ] && [ "$san" = thread ]; then
	# The 40 s outage and the cluster suite's slow cases run under ASan only; two of the cluster
	# cases cover the lock and announce threads here.
	c=tests/integration/test_sync_cluster.py
	set -- tests/integration/test_sync.py tests/integration/test_sync_faults.py \
		tests/integration/test_sync_safety.py tests/integration/test_sync_consul.py \
		tests/integration/test_sync_services.py tests/integration/test_consul_agent_mode.py \
		tests/integration/test_consul_login.py tests/integration/test_sync_pgsql.py \
		$c::test_single_writer_elects_one_agent_and_hands_over \
		$c::test_proxysql_servers_follow_the_announced_fleet \
		--deselect tests/integration/test_sync_safety.py::test_proxysql_down_40s_then_back_empty_gets_its_config_within_1s
elif [ $# -eq 0 ]; then
	# tests/sanitized.list: what runs here (and only here in make test), and what stays out.
	set -- $(sed -n 's/^\(tests\/[^ #]*\).*/\1/p' tests/sanitized.list) \
		$(sed -n 's/^-\(tests\/[^ #]*\).*/--deselect \1/p' tests/sanitized.list)
fi

reports=$(mktemp -d /tmp/sk-sanitizer-XXXXXX)
chmod 0777 "$reports" # probes dropped to another user write their reports here too
# halt_on_error=0: the process goes on and reports every race, exiting 66 at the end.
export TSAN_OPTIONS="log_path=$reports/tsan:exitcode=66:halt_on_error=0:second_deadlock_stack=1:suppressions=$PWD/tests/tsan.supp"
export ASAN_OPTIONS="log_path=$reports/asan:exitcode=86:halt_on_error=1:detect_leaks=1:detect_stack_use_after_return=1:check_initialization_order=1"
export UBSAN_OPTIONS="log_path=$reports/ubsan:halt_on_error=1:abort_on_error=1:print_stacktrace=1"
out=$reports/pytest.out

start=$(date +%s)
SIDEKICK_BIN=$bindir "$python" -m pytest -q -p no:cacheprovider "$@" 2>&1 | tee "$out"
# A short soak: drains, failovers, restarts and hostile entries interleaved, as no single test
# does. RSS and descriptor bounds mean nothing under ASan (its quarantine holds freed memory).
if [ -z "${SANITIZE_NO_SOAK:-}" ]; then
	scrape=
	[ "$san" = thread ] && scrape="--scrape 0.05"
	SIDEKICK_BIN=$bindir "$python" tests/soak/soak.py --changes 200 --restarts 6 --every 40 --rss-slack-kb 10000000 \
		--fd-slack 1000 $scrape 2>&1 | tee -a "$out" | tail -3
fi
rc=$(grep -E '^=* *[0-9]+ (passed|failed|error)' "$out" | sed -n 's/^=* *\([0-9][^=]*\) in [0-9.]*s.*/\1/p' | tail -1)
failed=0
grep -Eq '(^|[ ,])[0-9]+ (failed|error)' "$out" && failed=1
grep -q '^soak: [0-9]* failure' "$out" && failed=1
grep -q 'no tests ran' "$out" && failed=1

found=$(ls "$reports" | grep -E '^(asan|ubsan|tsan)\.' || true)
if [ -n "$found" ]; then
	for f in $found; do
		echo "==== sanitizer report $reports/$f"
		cat "$reports/$f"
	done
	failed=1
fi
if grep -Eq 'runtime error:|ERROR: (AddressSanitizer|LeakSanitizer)|WARNING: ThreadSanitizer' "$out"; then
	echo "sanitize: a sanitizer report appeared in the test output (see above)"
	failed=1
fi
echo "sanitize: $rc; $(echo "$found" | grep -c . ) report file(s); $(( $(date +%s) - start )) s; binaries $bindir"
[ $failed -eq 0 ] && rm -rf "$reports"
exit $failed
