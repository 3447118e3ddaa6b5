#!/bin/sh
# Prepares what the hardware lab VM needs, once, into a cache directory:
# Debian's 6.1 kernel and its modules (downloaded, not installed), and the
# out-of-tree gpio-sim module built against the same kernel's headers from
# two files of Debian's linux-source package (Debian does not build it).
# What that runs is installed first when missing (scripts/deps.sh lab).
# A second run finds everything in the cache and returns at once; a run
# beside it (another checkout's) waits for it.
#
#   scripts/lab/prepare.sh               # cache in ~/.cache/tobe-body-lab
#   LAB_CACHE=/var/cache/lab scripts/lab/prepare.sh
#
# Prints the cache's path on its last line.
set -eu

cache=${LAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tobe-body-lab}
mkdir -p "$cache"
# One preparation at a time: another checkout's run waits for this one
# and then finds the cache ready.
exec 9>"$cache/.lock"
flock 9
stamp="$cache/prepared"
if [ -f "$stamp" ]; then
	echo "lab: cache ready: $(cat "$stamp")" >&2
	echo "$cache"
	exit 0
fi

# What downloading the kernel and building gpio-sim runs.
"$(dirname "$0")/../deps.sh" lab >&2

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
# The kernel Debian's linux-image-amd64 points at now, and its source. On a
# machine whose package indexes were never fetched apt knows no kernel.
kernel() { apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-/ {print $2; exit}'; }
kpkg=$(kernel)
if [ -z "$kpkg" ]; then
	echo "lab: apt knows no linux-image-amd64; fetching the package indexes" >&2
	$SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq || true
	kpkg=$(kernel)
fi
if [ -z "$kpkg" ]; then
	echo "lab: apt knows no linux-image-amd64 (Debian bookworm's main in the sources?)" >&2
	exit 1
fi
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
# The headers name their compiler (gcc-12 for 6.1, which deps.sh installs).
cc=$(sed -n 's/^CC = .*(CROSS_COMPILE)\([^ ]*\)$/\1/p' "$root/usr/src/linux-headers-$kver/.kernelvariables")
if ! command -v "${cc:-gcc}" >/dev/null 2>&1; then
	echo "lab: Debian's kernel headers build with ${cc:-gcc}, which is not installed" >&2
	exit 1
fi
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
