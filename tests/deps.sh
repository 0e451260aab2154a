#!/bin/sh
# Install what the build and the tests need on Debian/Ubuntu (`make deps`). Idempotent: when
# everything is present it only runs dpkg-query and exits.
set -eu
packages="
gcc make pkg-config clang clang-format
libmariadb-dev libmariadb-dev-compat libconfig-dev libcurl4-openssl-dev libcjson-dev libmicrohttpd-dev
libcmocka-dev valgrind
mariadb-server mariadb-client galera-4 rsync iproute2 procps psmisc
python3 python3-pytest python3-pymysql
musl-tools cmake dpkg-dev binutils
"
missing=""
for p in $packages; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing="$missing $p"
	fi
done
if [ -z "$missing" ]; then
	echo "deps: all present"
	exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "deps: installing:$missing"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
# The packaged mariadb service is not used by the tests; they start their own servers on loopback.
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet mariadb 2>/dev/null; then
	$SUDO systemctl disable --now mariadb >/dev/null 2>&1 || true
fi
echo "deps: done"
