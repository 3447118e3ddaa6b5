#!/bin/sh
# Prepares what the hardware lab VM needs, once, into a cache directory:
# Debian's 6.1 kernel and its modules (downloaded, not installed), and the
# out-of-tree gpio-sim module built against the same kernel's headers from
# two files of Debian's linux-source package (Debian does not build it).
# A second run finds everything in the cache and returns at once.
#
#   scripts/lab/prepare.sh               # cache in ~/.cache/tobe-body-lab
#   LAB_CACHE=/var/cache/lab scripts/lab/prepare.sh
#
# Prints the cache's path on its last line.
set -eu

cache=${LAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tobe-body-lab}
mkdir -p "$cache"
stamp="$cache/prepared"
if [ -f "$stamp" ]; then
	echo "lab: cache ready: $(cat "$stamp")" >&2
	echo "$cache"
	exit 0
fi

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
need=""
command -v qemu-system-x86_64 >/dev/null 2>&1 || need="$need qemu-system-x86"
[ -x /bin/busybox ] && /bin/busybox --list 2>/dev/null | grep -qx modprobe || need="$need busybox-static"
command -v cpio >/dev/null 2>&1 || need="$need cpio"
command -v make >/dev/null 2>&1 && command -v gcc >/dev/null 2>&1 || need="$need build-essential"
command -v xz >/dev/null 2>&1 || need="$need xz-utils"
command -v depmod >/dev/null 2>&1 || [ -x /sbin/depmod ] || need="$need kmod"
if [ -n "$need" ]; then
	echo "lab: installing$need" >&2
	$SUDO apt-get update -qq
	# shellcheck disable=SC2086
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $need >&2
fi

# The kernel Debian's linux-image-amd64 points at now, and its source.
kpkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-/ {print $2; exit}')
kver=${kpkg#linux-image-}                      # 6.1.0-48-amd64
abi=${kver%-amd64}                              # 6.1.0-48
ver=$(apt-cache show "$kpkg" | awk '/^Version:/ {print $2; exit}')
echo "lab: kernel $kver ($ver)" >&2

dl="$cache/deb"
mkdir -p "$dl"
(
	cd "$dl"
	for p in "$kpkg" "linux-headers-$kver" "linux-headers-$abi-common" "linux-kbuild-6.1" "linux-source-6.1"; do
		ls "${p}"_*.deb >/dev/null 2>&1 || apt-get download "$p=$ver" >&2 2>/dev/null || apt-get download "$p" >&2
	done
)
root="$cache/root"
rm -rf "$root" && mkdir -p "$root"
for p in "$dl/$kpkg"_*.deb "$dl/linux-headers-$kver"_*.deb "$dl/linux-headers-$abi-common"_*.deb "$dl"/linux-kbuild-6.1_*.deb; do
	dpkg -x "$p" "$root"
done
cp "$root/boot/vmlinuz-$kver" "$cache/vmlinuz"
# The headers' Makefile names the common headers by their installed path.
sed -i "s|/usr/src/|$root/usr/src/|" "$root/usr/src/linux-headers-$kver/Makefile"

# gpio-sim and irq_sim from the source tarball, as one module.
src="$cache/gpio-simlab"
rm -rf "$src" && mkdir -p "$src"
dpkg -x "$dl"/linux-source-6.1_*.deb "$cache/source"
tarball=$(ls "$cache"/source/usr/src/linux-source-6.1.tar.xz)
tar -xJf "$tarball" -C "$src" --strip-components=1 --wildcards \
	'*/drivers/gpio/gpio-sim.c' '*/drivers/gpio/gpiolib.h' '*/kernel/irq/irq_sim.c'
rm -rf "$cache/source"
mv "$src/drivers/gpio/gpio-sim.c" "$src/drivers/gpio/gpiolib.h" "$src/kernel/irq/irq_sim.c" "$src/"
rm -rf "$src/drivers" "$src/kernel"
# irq_to_desc is not exported by Debian's kernel.
sed -i 's/handle_simple_irq(irq_to_desc(\([a-z_]*\)))/generic_handle_irq(\1)/' "$src/irq_sim.c"
if grep -q 'irq_to_desc' "$src/irq_sim.c"; then
	echo "lab: irq_sim.c still calls irq_to_desc; the patch for Debian's kernel no longer applies" >&2
	exit 1
fi
cat > "$src/Makefile" <<'MK'
obj-m := gpio-simlab.o
gpio-simlab-y := gpio-sim.o irq_sim.o
MK
make -s -C "$root/usr/src/linux-headers-$kver" M="$src" modules >&2
# The module goes in the kernel's tree, and modules.dep is made for the
# initramfs's modprobe.
mkdir -p "$root/lib/modules/$kver/extra"
cp "$src/gpio-simlab.ko" "$root/lib/modules/$kver/extra/"
PATH="$PATH:/sbin:/usr/sbin" depmod -b "$root" "$kver"

# The source package (139 MB) served its two files.
rm -f "$dl"/linux-source-6.1_*.deb

echo "$kver $(date -u +%Y-%m-%dT%H:%M:%SZ)" > "$stamp"
echo "lab: cache ready in $cache" >&2
echo "$cache"
