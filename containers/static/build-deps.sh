#!/bin/sh
# Build the static (musl) dependencies of `make static` from Debian's own source packages.
#
#   containers/static/build-deps.sh [DIR]      (DIR: build/static by default)
#
# Debian ships no static libcurl that links without Kerberos, no libcjson.a, and a libmariadb.a
# whose caching_sha2_password / sha256_password / client_ed25519 plugins are dlopen'ed, which a
# static binary cannot do. So this fetches the source packages with `apt-get source` (deb-src
# lines in a private apt configuration made from this machine's own Debian sources; /etc/apt is
# not touched) and builds with musl-gcc into DIR/prefix:
#
#   OpenSSL     libssl, libcrypto; no engines, no modules, no config autoload, old ciphers off
#   curl        libcurl: HTTP and HTTPS only, OpenSSL, unix sockets, threaded resolver
#   Connector/C libmariadb/ of the mariadb package, auth plugins caching_sha2_password,
#               sha256_password and client_ed25519 built in (STATIC), dialog/clear off
#   libconfig   its five C files        libmicrohttpd   no TLS        cJSON   its one C file
#
# plus one pkg-config file per library in DIR/prefix/lib/pkgconfig. Independent builds run in
# parallel. A finished build leaves DIR/prefix/.done with a hash of this script: a re-run with
# the same script returns at once, without the network; delete DIR to rebuild. Logs: DIR/src/*/.
# Needs the Debian packages musl-tools dpkg-dev cmake make perl, and the Debian archive.
set -eu

DIR=${1:-build/static}
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
SELF=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
PREFIX=$DIR/prefix
SRC=$DIR/src
APTDIR=$DIR/apt
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
stamp=$(sha256sum "$SELF" | cut -c1-16)

if [ -f "$PREFIX/.done" ] && [ "$(cat "$PREFIX/.done")" = "$stamp" ]; then
	echo "static deps: up to date ($PREFIX)"
	exit 0
fi
for tool in musl-gcc:musl-tools dpkg-source:dpkg-dev cmake:cmake perl:perl make:make; do
	command -v "${tool%%:*}" >/dev/null || {
		echo "static deps: ${tool%%:*} missing (apt-get install ${tool#*:})" >&2
		exit 2
	}
done

t0=$(date +%s)
log() { echo "static deps: [$(($(date +%s) - t0))s] $*"; }

rm -rf "$PREFIX" "$SRC"
mkdir -p "$PREFIX/lib/pkgconfig" "$PREFIX/include" "$SRC" "$APTDIR/lists/partial" "$APTDIR/archives/partial"

# --- deb-src lines from this machine's own Debian sources -----------------------------------
# Every Debian stanza (one-line .list or deb822 .sources) whose suite is a Debian release and
# whose components include main becomes a deb-src stanza; other repositories are left out.
sources=$APTDIR/sources.list
: >"$sources"
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
	[ -f "$f" ] || continue
	awk '$1 == "deb" && / main( |$)/ { $1 = "deb-src"; print }' "$f" >>"$sources"
done
for f in /etc/apt/sources.list.d/*.sources; do
	[ -f "$f" ] || continue
	awk 'BEGIN { RS = ""; FS = "\n" }
	{
		types = ""; uris = ""; suites = ""; comps = ""; signed = ""
		for (i = 1; i <= NF; i++) {
			if ($i ~ /^Types:/) types = $i
			else if ($i ~ /^URIs:/) { uris = $i; sub(/^URIs:[ \t]*/, "", uris) }
			else if ($i ~ /^Suites:/) { suites = $i; sub(/^Suites:[ \t]*/, "", suites) }
			else if ($i ~ /^Components:/) { comps = $i; sub(/^Components:[ \t]*/, "", comps) }
			else if ($i ~ /^Signed-By:/) { signed = $i; sub(/^Signed-By:[ \t]*/, "", signed) }
		}
		if (types !~ /deb([ \t]|$)/ || (" " comps " ") !~ / main /) next
		if (suites !~ /^(bookworm|trixie|bullseye|sid|stable|testing|unstable)/) next
		n = split(uris, u, /[ \t]+/); m = split(suites, s, /[ \t]+/)
		for (a = 1; a <= n; a++) for (b = 1; b <= m; b++) {
			opt = signed != "" && signed !~ /-----BEGIN/ ? " [signed-by=" signed "]" : ""
			print "deb-src" opt " " u[a] " " s[b] " main"
		}
	}' "$f" >>"$sources"
done
[ -s "$sources" ] || { echo "static deps: no Debian deb line in /etc/apt/sources.list*" >&2; exit 2; }

apt_src() {
	apt-get -q -o Acquire::Retries=5 -o Dir::Etc::SourceList="$sources" -o Dir::Etc::SourceParts=/nonexistent \
		-o Dir::State::Lists="$APTDIR/lists" -o Dir::Cache::Archives="$APTDIR/archives" \
		-o Dir::Cache="$APTDIR" -o APT::Sandbox::User=root "$@"
}
log "apt-get update (private deb-src lists: $(wc -l <"$sources") lines)"
apt_src update >"$APTDIR/update.log" 2>&1 || { cat "$APTDIR/update.log" >&2; exit 1; }

# fetch PACKAGE: download the newest source version the mirror really serves into SRC/PACKAGE
# (not unpacked). A mirror may list a version in its Sources index before it serves the
# files (seen with bookworm-security), so older listed versions are tried next.
fetch() {
	mkdir -p "$SRC/$1"
	versions=$(apt-cache -o Dir::Etc::SourceList="$sources" -o Dir::Etc::SourceParts=/nonexistent \
		-o Dir::State::Lists="$APTDIR/lists" -o Dir::Cache="$APTDIR" showsrc --only-source "$1" |
		sed -n 's/^Version: //p' | sort -rV)
	for v in $versions; do
		if (cd "$SRC/$1" && apt_src source --download-only "$1=$v" >download.log 2>&1); then
			echo "$v" >"$SRC/$1/version"
			log "apt-get source $1: $v"
			return 0
		fi
		rm -f "$SRC/$1"/*.dsc
	done
	cat "$SRC/$1/download.log" >&2
	echo "static deps: no version of source package $1 could be downloaded" >&2
	exit 1
}
# unpack PACKAGE: dpkg-source -x into SRC/PACKAGE/tree (Debian's patches applied).
unpack() {
	(cd "$SRC/$1" && dpkg-source --no-check -x ./*.dsc tree >unpack.log 2>&1)
}

for p in openssl curl mariadb libconfig libmicrohttpd cjson; do
	fetch "$p"
done

# musl has no kernel headers of its own: OpenSSL and Connector/C need a few linux/ and asm/
# headers, taken from Debian's linux-libc-dev without exposing glibc's headers.
KINC=$DIR/kernel-include
rm -rf "$KINC" && mkdir -p "$KINC"
multiarch=$(gcc -dumpmachine 2>/dev/null || echo "$(uname -m)-linux-gnu")
ln -s /usr/include/linux "$KINC/linux"
ln -s /usr/include/asm-generic "$KINC/asm-generic"
ln -s "/usr/include/$multiarch/asm" "$KINC/asm"

export CC=musl-gcc
CFLAGS_DEP="-O2 -fPIE -ffunction-sections -fdata-sections -isystem $KINC"
export CFLAGS="$CFLAGS_DEP"
export PKG_CONFIG_LIBDIR="$PREFIX/lib/pkgconfig"
export PKG_CONFIG_PATH=""
HOST="$(uname -m)-linux-musl"

build_openssl() {
	unpack openssl
	cd "$SRC/openssl/tree"
	case $(uname -m) in
	x86_64) target=linux-x86_64 ;;
	aarch64) target=linux-aarch64 ;;
	*) target=linux-generic64 ;;
	esac
	# openssldir=/etc/ssl: certificates where Debian and most images keep them. Nothing reads
	# openssl.cnf behind the probes' back (no-autoload-config): a probe pays no TLS set-up cost
	# when TLS is off, and behaves the same in every image.
	./Configure "$target" --prefix="$PREFIX" --libdir=lib --openssldir=/etc/ssl \
		no-shared no-module no-tests no-engine no-dso no-async no-afalgeng no-comp \
		no-autoload-config no-ssl3 no-weak-ssl-ciphers no-legacy no-ui-console \
		no-idea no-mdc2 no-rc2 no-rc4 no-rc5 no-md4 no-bf no-cast no-camellia no-aria no-seed \
		no-sm2 no-sm3 no-sm4 no-whirlpool no-gost no-siphash no-srp no-cms no-ts no-cmp no-ct \
		no-rfc3779 no-dtls no-srtp no-sctp no-ec2m no-ssl-trace $CFLAGS_DEP
	make -j"$JOBS" build_libs
	make install_dev
}

build_curl() {
	unpack curl
	cd "$SRC/curl/tree"
	[ -x configure ] || autoreconf -fi
	./configure --host="$HOST" --prefix="$PREFIX" --disable-shared --enable-static \
		--disable-dependency-tracking --with-openssl="$PREFIX" \
		--with-ca-bundle=/etc/ssl/certs/ca-certificates.crt --with-ca-path=/etc/ssl/certs \
		--without-zlib --without-brotli --without-zstd --without-libpsl --without-libidn2 \
		--without-nghttp2 --without-nghttp3 --without-ngtcp2 --without-librtmp --without-libssh2 \
		--without-libssh --without-libgsasl --without-gssapi --disable-ldap --disable-ldaps \
		--disable-rtsp --disable-dict --disable-telnet --disable-tftp --disable-pop3 --disable-imap \
		--disable-smtp --disable-gopher --disable-mqtt --disable-ftp --disable-file --disable-smb \
		--disable-manual --disable-ntlm --disable-kerberos-auth --disable-negotiate-auth \
		--disable-aws --disable-alt-svc --disable-hsts --disable-doh --disable-netrc \
		--disable-cookies --enable-threaded-resolver --enable-unix-sockets --disable-websockets
	make -j"$JOBS" -C lib
	make -C lib install
	make -C include install
}

# Only libmariadb/ of the big mariadb source package is needed: unpack just that directory of
# the upstream tarball, and check that no Debian patch touches it.
build_mariadb() {
	cd "$SRC/mariadb"
	mkdir -p tree build
	tar -xf "$(ls ./mariadb*.orig.tar.* | head -n1)" -C tree --strip-components=1 --wildcards '*/libmariadb/*'
	tar -xf "$(ls ./mariadb*.debian.tar.* | head -n1)" -C tree
	if grep -l '^+++ [^ ]*libmariadb/' tree/debian/patches/*.patch tree/debian/patches/*/*.patch 2>/dev/null; then
		echo "a Debian patch touches libmariadb/: apply it in $SELF"
		exit 1
	fi
	cd build
	cmake ../tree/libmariadb -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=musl-gcc \
		-DCMAKE_C_FLAGS="$CFLAGS_DEP" -DCMAKE_COMPILE_WARNING_AS_ERROR=OFF \
		-DCMAKE_INSTALL_PREFIX="$PREFIX" -DINSTALL_LIBDIR=lib -DINSTALL_INCLUDEDIR=include/mariadb \
		-DWITH_SSL=OPENSSL -DOPENSSL_ROOT_DIR="$PREFIX" -DOPENSSL_USE_STATIC_LIBS=ON \
		-DWITH_EXTERNAL_ZLIB=OFF -DWITH_UNIT_TESTS=OFF -DWITH_CURL=OFF -DWITH_DYNCOL=OFF \
		-DCLIENT_PLUGIN_CACHING_SHA2_PASSWORD=STATIC -DCLIENT_PLUGIN_SHA256_PASSWORD=STATIC \
		-DCLIENT_PLUGIN_CLIENT_ED25519=STATIC -DCLIENT_PLUGIN_MYSQL_CLEAR_PASSWORD=OFF \
		-DCLIENT_PLUGIN_DIALOG=OFF -DCLIENT_PLUGIN_AUTH_GSSAPI_CLIENT=OFF \
		-DCLIENT_PLUGIN_REMOTE_IO=OFF -DCLIENT_PLUGIN_PARSEC=OFF
	make -j"$JOBS" mariadbclient
	cmake -DCMAKE_INSTALL_COMPONENT=Development -DCMAKE_INSTALL_PREFIX="$PREFIX" -P include/cmake_install.cmake
	cp libmariadb/libmariadbclient.a "$PREFIX/lib/"
	for p in caching_sha2_password sha256_password client_ed25519; do
		nm "$PREFIX/lib/libmariadbclient.a" | grep -q " D ${p}_client_plugin$" ||
			{ echo "auth plugin $p is not built in"; exit 1; }
	done
}

# libconfig's five C files (the grammar and scanner come generated); its configure would only
# find what musl is known to have.
build_libconfig() {
	unpack libconfig
	cd "$SRC/libconfig/tree/lib"
	mkdir -p obj
	for f in libconfig grammar scanner scanctx strbuf; do
		musl-gcc $CFLAGS_DEP -DHAVE_NEWLOCALE -DHAVE_USELOCALE -DHAVE_FREELOCALE -c -o "obj/$f.o" "$f.c"
	done
	ar rcs "$PREFIX/lib/libconfig.a" obj/*.o
	cp libconfig.h "$PREFIX/include/"
}

build_libmicrohttpd() {
	unpack libmicrohttpd
	cd "$SRC/libmicrohttpd/tree"
	[ -x configure ] || autoreconf -fi
	./configure --host="$HOST" --prefix="$PREFIX" --disable-shared --enable-static \
		--disable-dependency-tracking --disable-https --without-gnutls --disable-curl --disable-doc \
		--disable-examples --disable-tools --disable-dauth --disable-bauth --disable-postprocessor \
		--disable-httpupgrade
	make -j"$JOBS" -C src/microhttpd
	make -C src/microhttpd install
	make -C src/include install
}

build_cjson() {
	unpack cjson
	mkdir -p "$PREFIX/include/cjson"
	cp "$SRC/cjson/tree/cJSON.h" "$PREFIX/include/cjson/"
	musl-gcc $CFLAGS_DEP -std=c89 -c -o "$SRC/cjson/cJSON.o" "$SRC/cjson/tree/cJSON.c"
	ar rcs "$PREFIX/lib/libcjson.a" "$SRC/cjson/cJSON.o"
}

# start NAME: run build_NAME in the background, its output in SRC/NAME/build.log.
start() {
	log "$1: building"
	(set -e; "build_$1") >"$SRC/$1/build.log" 2>&1 &
	eval "pid_$1=$!"
}
# finish NAME: wait for build_NAME; on failure show the end of its log and stop.
finish() {
	if eval "wait \$pid_$1"; then
		log "$1: done"
	else
		echo "static deps: $1 failed; last lines of $SRC/$1/build.log:" >&2
		tail -n 40 "$SRC/$1/build.log" >&2
		wait
		exit 1
	fi
}

# OpenSSL is the long pole; the libraries that do not need it build meanwhile.
start openssl
start libmicrohttpd
start libconfig
start cjson
finish openssl
start curl
start mariadb
for p in libconfig cjson libmicrohttpd mariadb curl; do
	finish "$p"
done

# --- pkg-config files ------------------------------------------------------------------------
# Written here rather than taken from the builds, so `pkg-config --static` gives exactly these
# archives and nothing from the host. Relative to the .pc file (${pcfiledir}), so the prefix
# still works when copied elsewhere (into an image build's context, say).
pc() { # NAME CFLAGS LIBS SOURCE-PACKAGE
	printf 'prefix=${pcfiledir}/../..\nName: %s\nDescription: static build for sidekick\nVersion: %s\nCflags: %s\nLibs: %s\n' \
		"$1" "$(cat "$SRC/$4/version")" "$2" "$3" >"$PREFIX/lib/pkgconfig/$1.pc"
}
I='${prefix}/include' L='${prefix}/lib'
rm -f "$PREFIX"/lib/pkgconfig/*.pc
pc libcrypto "-I$I" "$L/libcrypto.a -pthread" openssl
pc libssl "-I$I" "$L/libssl.a $L/libcrypto.a -pthread" openssl
pc libcurl "-I$I -DCURL_STATICLIB" "$L/libcurl.a $L/libssl.a $L/libcrypto.a -pthread" curl
pc libmariadb "-I$I/mariadb" "$L/libmariadbclient.a $L/libssl.a $L/libcrypto.a -pthread" mariadb
pc libconfig "-I$I" "$L/libconfig.a" libconfig
pc libmicrohttpd "-I$I" "$L/libmicrohttpd.a -pthread" libmicrohttpd
pc libcjson "-I$I -I$I/cjson" "$L/libcjson.a -lm" cjson

echo "$stamp" >"$PREFIX/.done"
log "done: $PREFIX"
