#!/bin/sh
# Release tarballs (make dist): for linux/arm64, linux/arm (GOARM=7) and
# linux/amd64, the stripped binary with the audio driver (scripts/cross.sh,
# cgo with Debian's cross compilers) and what a body installs beside it
# (scripts/stage.sh: the unit, the udev rules, the default config, the
# schemas, the board profiles, the README), with install.sh at the top:
#
#   dist/tobe-body-VERSION-linux-ARCH.tar.gz      ARCH: arm64, armv7, amd64
#     tobe-body-VERSION-linux-ARCH/install.sh
#     tobe-body-VERSION-linux-ARCH/usr/...
#   dist/tobe-body-VERSION-linux-ARCH.sbom.txt    go version -m of the binary:
#                                                 the toolchain, every module
#                                                 with its version and sum,
#                                                 the build settings; then the
#                                                 shared libraries it links
#                                                 (readelf's NEEDED)
#   dist/SHA256SUMS                               of the tarballs and SBOMs
#
# Environment: GO (go), VERSION, LDFLAGS (the -X flags; -s -w is added).
set -eu
cd "$(dirname "$0")/.."
GO=${GO:-go}
VERSION=${VERSION:?VERSION}
LDFLAGS=${LDFLAGS:-}
bins=$(mktemp -d)
trap 'rm -rf "$bins"' EXIT
GO=$GO OUT=$bins TESTS=no LDFLAGS="$LDFLAGS -s -w" scripts/cross.sh linux/arm64 linux/arm/7 linux/amd64
mkdir -p dist
for b in "$bins"/tobe-body-linux-*; do
	arch=${b##*/tobe-body-linux-}
	name=tobe-body-$VERSION-linux-$arch
	rm -rf "dist/$name" "dist/$name.tar.gz"
	scripts/stage.sh "dist/$name" "$b"
	install -m 0755 scripts/install.sh "dist/$name/install.sh"
	# Reproducible: the files' order, owners and times are fixed.
	tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@"$(git log -1 --format=%ct 2>/dev/null || echo 0)" \
		-C dist -czf "dist/$name.tar.gz" "$name"
	rm -rf "dist/$name"
	size=$(stat -c %s "$b")
	{
		env -u GOOS -u GOARCH -u GOARM "$GO" version -m "$b" | sed "1s|^[^:]*:|usr/bin/tobe-body ($size bytes):|"
		readelf -d "$b" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\tlib\t\1/p'
	} >"dist/$name.sbom.txt"
done
(cd dist && sha256sum tobe-body-"$VERSION"-linux-*.tar.gz tobe-body-"$VERSION"-linux-*.sbom.txt >SHA256SUMS)
ls -l dist/tobe-body-"$VERSION"-* dist/SHA256SUMS
