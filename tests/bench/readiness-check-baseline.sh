#!/bin/bash
# The baseline of tests/bench/probes.py: what the PXC operator's build/readiness-check.sh does
# (reference/probes.md section 1.3), with the same programs: bash, cat, hostname, awk, timeout,
# the mariadb client, grep, sed and tr. Only the target can be overridden, so the benchmark
# stays on loopback: BENCH_HOST (instead of the node IP), BENCH_PORT (instead of 33062) and
# BENCH_SECRET (instead of /etc/mysql/mysql-users-secret/monitor). Exit 0 ready, 1 not.

if [[ $1 == '-h' || $1 == '--help' ]]; then
	echo "Usage: $0 <user> <pass>"
	exit
fi

if [[ -f '/var/lib/mysql/sleep-forever' ]] || [[ -f '/tmp/recovery-case' ]]; then
	exit 0
fi

{ set +x; } 2>/dev/null
MYSQL_USERNAME="${MYSQL_USERNAME:-monitor}"
SECRET_FILE="${BENCH_SECRET:-/etc/mysql/mysql-users-secret/monitor}"
if [ -f "$SECRET_FILE" ]; then
	MYSQL_PASSWORD=$(cat "$SECRET_FILE")
else
	MYSQL_PASSWORD="${MONITOR_PASSWORD}"
fi
DEFAULTS_EXTRA_FILE=${DEFAULTS_EXTRA_FILE:-/etc/my.cnf}
AVAILABLE_WHEN_DONOR=${AVAILABLE_WHEN_DONOR:-1}
NODE_IP=$(hostname -I | awk ' { print $1 } ')
NODE_IP=${BENCH_HOST:-$NODE_IP}
PORT=${BENCH_PORT:-33062}

# Timeout exists for instances where mysqld may be hung
TIMEOUT=$((${READINESS_CHECK_TIMEOUT:-10} - 1))

EXTRA_ARGS=""
if [[ -n $DEFAULTS_EXTRA_FILE && -r $DEFAULTS_EXTRA_FILE ]]; then
	EXTRA_ARGS="--defaults-extra-file=$DEFAULTS_EXTRA_FILE"
fi

export MYSQL_PWD=${MYSQL_PASSWORD}
MYSQL_CMDLINE="/usr/bin/timeout $TIMEOUT mariadb ${EXTRA_ARGS} -nNE --connect-timeout=$TIMEOUT"
# shellcheck disable=SC2207 # split into an array, as the operator's script does
WSREP_STATUS=($($MYSQL_CMDLINE -P "$PORT" -h"${NODE_IP}" --protocol=TCP --user="${MYSQL_USERNAME}" \
	--init-command="SET SESSION wsrep_sync_wait=0;" -e "SHOW GLOBAL STATUS LIKE 'wsrep_%';" |
	grep -A 1 -E 'wsrep_local_state$|wsrep_cluster_status$' | sed -n -e '2p' -e '5p' | tr '\n' ' '))
set -x

if [[ ${WSREP_STATUS[1]} == 'Primary' && (${WSREP_STATUS[0]} -eq 4 || (${WSREP_STATUS[0]} -eq 2 && $AVAILABLE_WHEN_DONOR -eq 1)) ]]; then
	exit 0
fi

exit 1
