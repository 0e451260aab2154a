#!/bin/sh
# Install what the build and the tests need on Debian/Ubuntu. Idempotent: when everything is
# present it only runs dpkg-query and exits.
#
#   tests/deps.sh build        what `make all`, `make static` and `make deb` need (compiler, -dev
#                              packages, musl, dpkg-dev): `make build-deps`; no server, no service touched
#   tests/deps.sh test         what the tests need besides (MariaDB and Galera, Patroni and
#                              PostgreSQL 15, podman, prometheus, valgrind, clang, npm, lintian, ...):
#                              a development machine only
#   tests/deps.sh              both (`make deps`)
set -eu
build_packages="
gcc make pkg-config
libmariadb-dev libmariadb-dev-compat libconfig-dev libcurl4-openssl-dev libcjson-dev libmicrohttpd-dev
musl-tools cmake dpkg-dev binutils perl git
"
test_packages="
clang clang-format libcmocka-dev valgrind
mariadb-server mariadb-client galera-4 rsync iproute2 iptables procps psmisc strace time
python3 python3-pytest python3-pymysql
patroni python3-consul postgresql-15
systemd yamllint buildah podman runc debootstrap lintian
prometheus python3-yaml
"
[ $# -gt 0 ] || set -- build test
packages=""
want_test=""
for part in "$@"; do
	case $part in
	build) packages="$packages $build_packages" ;;
	test)
		packages="$packages $test_packages"
		want_test=1
		;;
	*)
		echo "usage: tests/deps.sh [build] [test]" >&2
		exit 2
		;;
	esac
done
# Node.js and npm for the manifest tests: Debian's npm unless a node install brings its own.
[ -z "$want_test" ] || command -v npm >/dev/null 2>&1 || packages="$packages npm"
# npm packages of the manifest tests (tests/k8s/package.json, pinned by its package-lock.json).
npm_deps() {
	[ -n "$want_test" ] || return 0
	k8s=$(dirname "$0")/k8s
	[ -d "$k8s/node_modules/kubernetes-models" ] && [ -d "$k8s/node_modules/yaml" ] && return 0
	echo "deps: npm packages for tests/k8s"
	(cd "$k8s" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
}
missing=""
for p in $packages; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing="$missing $p"
	fi
done
if [ -z "$missing" ]; then
	npm_deps
	echo "deps: all present"
	exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
# Another apt or dpkg (a fresh machine's unattended upgrades) may hold the package locks: wait for
# it, up to DEPS_LOCK_WAIT seconds, rather than fail at once. apt waits for the dpkg lock itself
# (DPkg::Lock::Timeout); the lists lock of `update` is retried here.
lock_wait=${DEPS_LOCK_WAIT:-600}
apt_get() {
	started=$(date +%s)
	while :; do
		out=$(DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o Acquire::Retries=5 \
			-o DPkg::Lock::Timeout="$lock_wait" "$@" 2>&1) && return 0
		case $out in
		*"Could not get lock"* | *"Unable to lock"* | *"Unable to acquire"*)
			if [ $(($(date +%s) - started)) -ge "$lock_wait" ]; then
				printf '%s\n' "$out" >&2
				echo "deps: apt's lock still held after ${lock_wait} s (DEPS_LOCK_WAIT)" >&2
				return 1
			fi
			echo "deps: another apt or dpkg holds its lock; waiting"
			sleep 5
			;;
		*)
			printf '%s\n' "$out" >&2
			return 1
			;;
		esac
	done
}
echo "deps: installing:$missing"
apt_get update -qq
apt_get install -y -qq --no-install-recommends $missing >/dev/null
# Test set-up only, never reached by `tests/deps.sh build`: the packaged mariadb service is not used
# by the tests; they start their own servers on loopback.
if [ -n "$want_test" ] && command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet mariadb 2>/dev/null; then
	$SUDO systemctl disable --now mariadb >/dev/null 2>&1 || true
fi
# PostgreSQL and Patroni are there for tests/integration/patroni.py, which starts its own clusters on
# free loopback ports as user postgres: the packaged cluster (15/main on 5432, created and started by
# the first install) is not used. Stop it and keep it from starting at boot; patroni.service needs an
# /etc/patroni/config.yml that nothing here writes.
if [ -n "$want_test" ] && command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet postgresql 2>/dev/null; then
	$SUDO systemctl disable --now postgresql >/dev/null 2>&1 || true
fi
if [ -n "$want_test" ] && command -v pg_lsclusters >/dev/null 2>&1; then
	pg_lsclusters -h 2>/dev/null | while read -r version cluster _port status _rest; do
		case $status in
		online*) $SUDO pg_ctlcluster "$version" "$cluster" stop >/dev/null 2>&1 || true ;;
		esac
	done
fi
# Package prometheus is there for promtool (tests/integration/test_alerts.py); its service is not used.
if [ -n "$want_test" ] && command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet prometheus 2>/dev/null; then
	$SUDO systemctl disable --now prometheus >/dev/null 2>&1 || true
fi
npm_deps
echo "deps: done"
