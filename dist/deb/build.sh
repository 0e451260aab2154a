#!/bin/sh
# `make deb`: Debian packages sidekick-probes and proxysql-sync from the binaries of `make all`,
# built with plain dpkg-deb (no debian/ source tree, no fakeroot: --root-owner-group).
# Dependencies are computed by dpkg-shlibdeps from the binaries; docs/packages.md says what each
# package installs and why the binaries are dynamic.
#
#   dist/deb/build.sh BIN OUT VERSION       e.g. dist/deb/build.sh bin build/deb 0.1.0
#   DEB_MAINTAINER="Name <address>"         the Maintainer field (default: HEAD's author)
set -eu
[ $# -eq 3 ] || { echo "usage: dist/deb/build.sh BIN OUT VERSION" >&2; exit 2; }
BIN=$1
OUT=$2
VERSION=$3
cd "$(dirname "$0")/../.."
DEB=dist/deb
for tool in dpkg-deb:dpkg dpkg-shlibdeps:dpkg-dev strip:binutils gzip:gzip; do
	command -v "${tool%%:*}" >/dev/null || {
		echo "deb: ${tool%%:*} missing (apt-get install ${tool#*:}, or make build-deps)" >&2
		exit 2
	}
done
ARCH=$(dpkg --print-architecture)
MAINTAINER=${DEB_MAINTAINER:-$(git log -1 --format='%an <%ae>' 2>/dev/null || true)}
[ -n "$MAINTAINER" ] || { echo "deb: no maintainer: set DEB_MAINTAINER=\"Name <address>\"" >&2; exit 2; }
# The changelog's date: the commit's, so the same tree gives the same packages.
DATE=$(git log -1 --format=%cD 2>/dev/null || date -R)
REV=$(git describe --always --dirty 2>/dev/null || echo unknown)
# The copyright years: the first and the last commit's.
YEARS=$(git log --format=%cd --date=format:%Y 2>/dev/null | sed -n '1h;$G;$p' | uniq | paste -sd- -)
[ -n "$YEARS" ] || YEARS=$(date +%Y)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/sidekick-deb.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
umask 022
mkdir -p "$OUT"

# dist/ files have @BINDIR@ and @DOCDIR@ where make install puts its PREFIX.
dist_sed() { # SRC DEST DOCDIR
	sed -e 's|@BINDIR@|/usr/bin|g' -e "s|@DOCDIR@|$3|g" "$1" >"$2"
	chmod 0644 "$2"
}

# The binaries (stripped) into ROOT/usr/bin, each with a manual page made from its --help.
bins() { # ROOT NAME...
	root=$1
	shift
	install -d "$root/usr/bin"
	for b in "$@"; do
		[ -x "$BIN/$b" ] || { echo "deb: $BIN/$b missing (make all)" >&2; exit 2; }
		install -m 0755 "$BIN/$b" "$root/usr/bin/$b"
		strip --remove-section=.comment --remove-section=.note --strip-unneeded "$root/usr/bin/$b"
		install -d "$root/usr/share/man/man1"
		$DEB/manpage.sh "$BIN/$b" "$VERSION" | gzip -9n >"$root/usr/share/man/man1/$b.1.gz"
		chmod 0644 "$root/usr/share/man/man1/$b.1.gz"
	done
}

# /usr/share/doc/PKG: copyright, a Debian-format changelog, the documents named.
docs() { # ROOT PKG DOC...
	root=$1
	pkg=$2
	shift 2
	doc=$root/usr/share/doc/$pkg
	install -d "$doc"
	sed "s/@YEARS@/$YEARS/" "$DEB/copyright" >"$doc/copyright"
	chmod 0644 "$doc/copyright"
	printf '%s (%s) unstable; urgency=medium\n\n  * Built from the sidekick repository at %s.\n\n -- %s  %s\n' \
		sidekick "$VERSION" "$REV" "$MAINTAINER" "$DATE" | gzip -9n >"$doc/changelog.gz"
	for f in "$@"; do
		install -m 0644 "$f" "$doc/"
	done
}

# DEBIAN/: control (Depends from dpkg-shlibdeps, Installed-Size), md5sums, conffiles, scripts.
control() { # ROOT PKG
	root=$1
	pkg=$2
	install -d -m 0755 "$root/DEBIAN"
	mkdir -p "$WORK/shlibs/debian"
	printf 'Source: sidekick\n\nPackage: %s\nArchitecture: any\n' "$pkg" >"$WORK/shlibs/debian/control"
	set -- "$root"/usr/bin/*
	(cd "$WORK/shlibs" && dpkg-shlibdeps -O "$@") >"$WORK/shlibs.out" 2>"$WORK/shlibs.err" || {
		cat "$WORK/shlibs.err" >&2
		exit 1
	}
	depends=$(sed -n 's/^shlibs:Depends=//p' "$WORK/shlibs.out")
	[ -n "$depends" ] || { echo "deb: dpkg-shlibdeps found no dependency for $pkg" >&2; exit 1; }
	if [ -f "$DEB/$pkg.lintian-overrides" ]; then
		install -d "$root/usr/share/lintian/overrides"
		install -m 0644 "$DEB/$pkg.lintian-overrides" "$root/usr/share/lintian/overrides/$pkg"
	fi
	size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
	sed -e "s|@VERSION@|$VERSION|" -e "s|@ARCH@|$ARCH|" -e "s|@MAINTAINER@|$MAINTAINER|" \
		-e "s|@SIZE@|$size|" -e "s|@DEPENDS@|$depends|" "$DEB/$pkg.control" >"$root/DEBIAN/control"
	(cd "$root" && find . -path ./DEBIAN -prune -o -type f -print | sed 's|^\./||' | LC_ALL=C sort |
		xargs md5sum >DEBIAN/md5sums)
	chmod 0644 "$root/DEBIAN/control" "$root/DEBIAN/md5sums"
	(cd "$root" && find etc -type f 2>/dev/null | sed 's|^|/|' | LC_ALL=C sort) >"$root/DEBIAN/conffiles"
	[ -s "$root/DEBIAN/conffiles" ] || rm -f "$root/DEBIAN/conffiles"
	for s in preinst postinst prerm postrm; do
		[ -f "$DEB/$pkg.$s" ] && install -m 0755 "$DEB/$pkg.$s" "$root/DEBIAN/$s"
	done
	rm -f "$OUT/${pkg}_"*"_$ARCH.deb"
	dpkg-deb --root-owner-group -Zxz --build "$root" "$OUT/${pkg}_${VERSION}_$ARCH.deb" >/dev/null
	echo "deb: $OUT/${pkg}_${VERSION}_$ARCH.deb"
}

# sidekick-probes: the probes; clustercheck's systemd socket and units, its xinetd entry (off).
P=$WORK/sidekick-probes
# shellcheck disable=SC2046 # one word a probe
bins "$P" $(sed -n 's/#.*//; /[^[:space:]]/p' dist/probes.list)
install -d "$P/lib/systemd/system" "$P/etc/sidekick" "$P/etc/xinetd.d" "$P/usr/share/doc/sidekick-probes/examples"
for f in clustercheck.socket clustercheck@.service clustercheck-http.service clustercheck-register.service; do
	dist_sed "dist/systemd/$f" "$P/lib/systemd/system/$f" /usr/share/doc/sidekick-probes
done
# A conffile, so off until the administrator says otherwise: xinetd would serve it at its next reload.
dist_sed dist/xinetd/mysqlchk "$WORK/mysqlchk" /usr/share/doc/sidekick-probes
sed 's/^\(\tdisable *= \)no$/\1yes/' "$WORK/mysqlchk" >"$P/etc/xinetd.d/mysqlchk"
grep -q '^	disable *= yes$' "$P/etc/xinetd.d/mysqlchk" || { echo "deb: xinetd entry not disabled" >&2; exit 1; }
chmod 0644 "$P/etc/xinetd.d/mysqlchk"
dist_sed dist/cron/sidekick "$P/usr/share/doc/sidekick-probes/examples/cron-sidekick" /usr/share/doc/sidekick-probes
docs "$P" sidekick-probes README.md docs/deploy.md docs/packages.md docs/probes.md docs/register.md docs/security.md
control "$P" sidekick-probes

# proxysql-sync: the agent, its unit, its configuration (a conffile), the drain drop-in for
# ProxySQL's own unit (shipped, not active: see docs/packages.md).
S=$WORK/proxysql-sync
bins "$S" proxysql-sync
install -d "$S/lib/systemd/system" "$S/etc/sidekick" "$S/usr/share/proxysql-sync/proxysql.service.d" \
	"$S/usr/share/doc/proxysql-sync/examples"
dist_sed dist/systemd/proxysql-sync.service "$S/lib/systemd/system/proxysql-sync.service" /usr/share/doc/proxysql-sync
dist_sed dist/systemd/proxysql.service.d/sidekick-drain.conf \
	"$S/usr/share/proxysql-sync/proxysql.service.d/sidekick-drain.conf" /usr/share/doc/proxysql-sync
install -m 0640 dist/config/proxysql-sync.conf "$S/etc/sidekick/proxysql-sync.conf"
install -m 0644 dist/config/proxysql-sync.conf "$S/usr/share/doc/proxysql-sync/examples/proxysql-sync.conf"
dist_sed dist/cron/sidekick "$S/usr/share/doc/proxysql-sync/examples/cron-sidekick" /usr/share/doc/proxysql-sync
docs "$S" proxysql-sync README.md docs/deploy.md docs/packages.md docs/proxysql-sync.md docs/security.md
control "$S" proxysql-sync
