#!/bin/sh
# Checks this external tree against a Buildroot checkout (a release's,
# 2026.08 or later): every symbol of upstream-symbols.txt is declared
# there; each defconfig loads without a warning, and every line it asks
# for is in the .config it makes; `make tobe-body-show-info` describes
# the package; utils/check-package passes on the package, the scripts
# and the defconfigs (it needs shellcheck, flake8 and python3-magic).
# Nothing is downloaded or built.
#
#   buildroot/check-buildroot.sh BUILDROOT_DIR
set -eu
br=$(cd "${1:?usage: check-buildroot.sh BUILDROOT_DIR}" && pwd)
ext=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail=0

echo "buildroot: $(sed -n 's/^export BR2_VERSION := //p' "$br/Makefile") ($(git -C "$br" rev-parse HEAD 2>/dev/null || echo 'no git'))"
declared=$(find "$br" -path "$br/output" -prune -o -name 'Config.in*' -type f \
	-exec sed -n 's/^[[:space:]]*\(menu\)\{0,1\}config[[:space:]]\{1,\}\(BR2_[A-Za-z0-9_]*\).*/\2/p' {} + | sort -u)
missing=$(grep -v '^#' "$ext/upstream-symbols.txt" | while read -r s; do
	echo "$declared" | grep -qx "$s" || echo "upstream-symbols.txt: $s is not declared by this checkout"
done)
[ -z "$missing" ] || { echo "$missing"; fail=1; }
echo "upstream-symbols.txt: $(grep -vc '^#' "$ext/upstream-symbols.txt") symbols, each declared by this checkout"

for d in "$ext"/configs/*_defconfig; do
	name=$(basename "$d")
	o=$out/$name
	log=$(make -s -C "$br" O="$o" BR2_EXTERNAL="$ext" "$name" 2>&1 | grep -v '^#\|^$\|GEN ' || true)
	if [ -n "$log" ]; then
		echo "$name: make printed:"; echo "$log"; fail=1
	fi
	grep -v '^#' "$d" | grep . | while read -r line; do
		grep -qxF "$line" "$o/.config" || echo "$name: asks for $line, the .config has $(grep "^${line%%=*}=" "$o/.config" || echo 'it unset')"
	done | grep . && fail=1
	grep -qx '# BR2_TARGET_GENERIC_REMOUNT_ROOTFS_RW is not set' "$o/.config" || { echo "$name: the root is remounted read-write"; fail=1; }
	echo "$name: loads; every line is in the .config"
done

set -- "$ext"/configs/*_defconfig
first=$out/$(basename "$1")
make -s -C "$br" O="$first" tobe-body-show-info
echo
# Debian's python3 has python3-magic; another python3 first on PATH may not.
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3
(cd "$br" && "$py" ./utils/check-package -b "$ext"/package/tobe-body/* "$ext"/configs/* "$ext"/board/tobe/*.sh \
	"$ext"/board/tobe/rootfs-overlay/usr/libexec/tobe-body/* "$ext"/Config.in "$ext"/external.mk) || fail=1
exit $fail
