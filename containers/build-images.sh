#!/bin/sh
# `make images`: build the sidekick-probes and sidekick-sync images (containers/*/Dockerfile)
# with buildah, without a Docker engine and without pulling anything.
#
# The Dockerfiles start FROM debian:bookworm. No registry is reachable here, so that base is
# made locally with debootstrap from the Debian mirror this machine's apt sources name, with the
# builder's packages already in it, and stored as docker.io/library/debian:bookworm in a private
# image store (IMAGES_DIR/storage, overlay driver; /var/lib/containers is not touched). The
# debootstrapped root filesystem is kept as IMAGES_DIR/bookworm.tar to re-import it quickly. Builds use --pull=never,
# --isolation=chroot and --network=host (the builder's apt-get reaches the Debian mirror only).
# Re-runs reuse the base and buildah's layer cache.
#
#   containers/build-images.sh            IMAGES_DIR=build/images by default
#   podman --root build/images/storage --runroot build/images/run images
set -eu
cd "$(dirname "$0")/.."
IMAGES_DIR=${IMAGES_DIR:-build/images}
mkdir -p "$IMAGES_DIR"
IMAGES_DIR=$(cd "$IMAGES_DIR" && pwd)
STORE="--root $IMAGES_DIR/storage --runroot $IMAGES_DIR/run --storage-driver overlay"
BASE=docker.io/library/debian:bookworm
# What the Dockerfiles' builder stage installs: already in the base, so its apt-get is quick.
BUILDER_PACKAGES=ca-certificates,gcc,libc6-dev,make,pkg-config,musl-tools,cmake,dpkg-dev,perl,xz-utils,binutils

t0=$(date +%s)
log() { echo "images: [$(($(date +%s) - t0))s] $*"; }
for tool in buildah:buildah podman:podman debootstrap:debootstrap; do
	command -v "${tool%%:*}" >/dev/null || {
		echo "images: ${tool%%:*} missing (apt-get install ${tool#*:})" >&2
		exit 2
	}
done

# The Debian mirror of this machine's apt sources (deb822 or one-line), for debootstrap.
mirror() {
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		awk 'BEGIN { RS = ""; FS = "\n" }
		{
			uri = ""; ok = 0
			for (i = 1; i <= NF; i++) {
				if ($i ~ /^URIs:/) { uri = $i; sub(/^URIs:[ \t]*/, "", uri); sub(/[ \t].*/, "", uri) }
				if ($i ~ /^Suites:/ && $i ~ /[ \t]bookworm([ \t]|$)/) ok = 1
			}
			if (ok && uri != "") { print uri; exit }
		}' "$f"
	done
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -f "$f" ] && awk '$1 == "deb" && $3 == "bookworm" { print ($2 ~ /^\[/ ? $3 : $2); exit }' "$f"
	done
}

stamp=$(echo "$BUILDER_PACKAGES" | sha256sum | cut -c1-16)
rootfs_tar=$IMAGES_DIR/bookworm.tar
if [ "$(cat "$IMAGES_DIR/base.stamp" 2>/dev/null)" != "$stamp" ] || [ ! -s "$rootfs_tar" ]; then
	url=$(mirror | head -n1)
	[ -n "$url" ] || { echo "images: no Debian bookworm mirror in /etc/apt/sources.list*" >&2; exit 2; }
	log "debootstrap bookworm from $url (minbase + builder packages)"
	rootfs=$IMAGES_DIR/rootfs
	rm -rf "$rootfs_tar"
	# A mirror that drops some downloads fails the whole run; what did arrive stays in the
	# cache, so a later attempt (up to five) only fetches the rest.
	mkdir -p "$IMAGES_DIR/debs"
	# debootstrap gives up on a package after one failed wget: let wget itself retry first.
	printf 'tries = 5\nwaitretry = 3\ntimeout = 60\nretry_connrefused = on\n' >"$IMAGES_DIR/wgetrc"
	export WGETRC="$IMAGES_DIR/wgetrc"
	for attempt in 1 2 3 4 5; do
		rm -rf "$rootfs"
		debootstrap --variant=minbase --include="$BUILDER_PACKAGES" --cache-dir="$IMAGES_DIR/debs" \
			bookworm "$rootfs" "$url" >"$IMAGES_DIR/debootstrap.log" 2>&1 && break
		tail -5 "$IMAGES_DIR/debootstrap.log" >&2
		[ "$attempt" -lt 5 ] || { echo "images: debootstrap failed 5 times (log: $IMAGES_DIR/debootstrap.log)" >&2; exit 1; }
		log "debootstrap attempt $attempt failed; again in 10 s with the packages fetched so far"
		sleep 10
	done
	rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
	tar -C "$rootfs" -cf "$rootfs_tar" .
	rm -rf "$rootfs"
	echo "$stamp" >"$IMAGES_DIR/base.stamp"
	buildah $STORE rmi -f "$BASE" >/dev/null 2>&1 || true
fi
if [ -z "$(buildah $STORE images -q "$BASE" 2>/dev/null)" ]; then
	log "import $rootfs_tar as $BASE"
	podman $STORE import --quiet --change 'CMD ["/bin/bash"]' "$rootfs_tar" "$BASE" >/dev/null
fi

for img in probes sync; do
	log "build sidekick-$img"
	buildah $STORE bud --pull=never --isolation=chroot --network=host --layers --quiet \
		-f "containers/$img/Dockerfile" -t "localhost/sidekick-$img:latest" . >"$IMAGES_DIR/build-$img.log" 2>&1 ||
		{ tail -30 "$IMAGES_DIR/build-$img.log" >&2; exit 1; }
done
podman $STORE images --format '{{.Repository}}:{{.Tag}} {{.Size}}' --filter reference=localhost/sidekick-*
log "done"
