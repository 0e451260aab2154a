#!/bin/sh
# Run every libFuzzer harness for a fixed time and replay the kept crash inputs.
#
#   tests/fuzz/run.sh [SECONDS] [HARNESS...]    (make fuzz: builds first, FUZZ_SECONDS=8)
#
# For each harness build/fuzz/bin/fuzz_X: replay tests/fuzz/regressions/fuzz_X/* (each must
# pass), then fuzz for SECONDS from tests/fuzz/corpus/fuzz_X (the seeds, never written) and
# build/fuzz/corpus/fuzz_X (what earlier runs found; kept between runs, not committed). A crash
# leaves its input in build/fuzz/artifacts/fuzz_X/; once the bug is fixed, copy that file into
# tests/fuzz/regressions/fuzz_X/ under a name that says what it was. Prints one table row per
# harness; exits 1 when any harness failed.
set -u
cd "$(dirname "$0")/../.."
secs=${1:-8}
[ $# -gt 0 ] && shift
names=${*:-$(cd build/fuzz/bin 2>/dev/null && ls fuzz_* 2>/dev/null | grep -v '\.d$')}
if [ -z "$names" ]; then
	echo "fuzz: no harness built (run: make fuzz-build)"
	exit 1
fi

# Speed over forensics for the short runs: no 0xbe fill of fresh memory, a small quarantine.
# Any report stops the run.
export ASAN_OPTIONS="${ASAN_OPTIONS:-max_malloc_fill_size=0:quarantine_size_mb=16:detect_leaks=1:abort_on_error=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

status=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT
printf '%-18s %6s %6s %6s %10s %8s  %s\n' harness seeds kept found execs exec/s result
for h in $names; do
	# Absolute paths: a harness may change its working directory (fuzz_argv does).
	bin=$PWD/build/fuzz/bin/$h
	seeds=$PWD/tests/fuzz/corpus/$h
	regs=$PWD/tests/fuzz/regressions/$h
	work=$PWD/build/fuzz/corpus/$h
	art=$PWD/build/fuzz/artifacts/$h
	mkdir -p "$work" "$art" "$seeds"
	result=ok
	nregs=0
	if [ -d "$regs" ] && [ -n "$(ls -A "$regs")" ]; then
		nregs=$(ls "$regs" | wc -l)
		if ! "$bin" -close_fd_mask=1 "$regs"/* >"$log" 2>&1; then
			result="FAILED replaying $regs"
			grep -m5 -E 'INVARIANT|ERROR|SUMMARY|Running:' "$log" | sed 's/^/    /'
		fi
	fi
	if [ "$result" = ok ]; then
		"$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=8192 -print_final_stats=1 \
			-close_fd_mask=1 -artifact_prefix="$art/" "$work" "$seeds" >"$log" 2>&1
		rc=$?
		if [ $rc -ne 0 ]; then
			result="CRASH (exit $rc), input in $art/"
			grep -m8 -E 'INVARIANT|ERROR|SUMMARY|runtime error|Test unit written' "$log" | sed 's/^/    /'
		fi
	fi
	[ "$result" = ok ] || status=1
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
	printf '%-18s %6s %6s %6s %10s %8s  %s\n' "$h" "$(ls "$seeds" | wc -l)" "$nregs" "$(ls "$work" | wc -l)" \
		"${execs:--}" "${rate:--}" "$result"
done
exit $status
