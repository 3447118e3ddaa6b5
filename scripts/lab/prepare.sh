#!/bin/sh
# Prepares what the hardware lab VM needs, once, into a cache directory:
# Debian's 6.1 kernel and its modules (downloaded, not installed), and the
# out-of-tree gpio-sim, uleds and i2c-stub modules built against the same kernel's
# headers from files of Debian's linux-source package (Debian builds
# neither).
# LAB_ARCH names the machine: amd64 (the default), arm64 (Debian's arm64
# kernel) or armv7 (Debian's armhf armmp-lpae kernel). For an ARM machine
# the module is built by Debian's cross compiler with the host's kbuild
# tools, and the architecture's static busybox is kept for its initramfs.
# What that runs is installed first when missing (scripts/deps.sh lab, and
# lab-arm64 or lab-armv7).
# A second run finds everything in the cache and returns at once; a run
# beside it (another checkout's) waits for it.
#
#   scripts/lab/prepare.sh               # cache in ~/.cache/tobe-body-lab
#   LAB_ARCH=arm64 scripts/lab/prepare.sh   # in ~/.cache/tobe-body-lab/arm64
#   LAB_CACHE=/var/cache/lab scripts/lab/prepare.sh
#
# Prints the cache's path on its last line.
set -eu

arch=${LAB_ARCH:-amd64}
# Debian's architecture, its kernel flavour, and how a module is built for
# it from here.
case $arch in
amd64) deb=amd64 flavour=amd64 cross="" karch="" user="" ;;
arm64) deb=arm64 flavour=arm64 cross=aarch64-linux-gnu- karch=arm64 user="qemu-aarch64-static -L /" ;;
armv7) deb=armhf flavour=armmp-lpae cross=arm-linux-gnueabihf- karch=arm user="qemu-arm-static -L /" ;;
*)
	echo "lab: LAB_ARCH=$arch: want amd64, arm64 or armv7" >&2
	exit 2
	;;
esac
cache=${LAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tobe-body-lab}
[ "$arch" = amd64 ] || cache="$cache/$arch"
mkdir -p "$cache"
# One preparation at a time: another checkout's run waits for this one
# and then finds the cache ready.
exec 9>"$cache/.lock"
flock 9
stamp="$cache/prepared"
# What the cache holds changes with the recipe: a cache made by an older
# one is made again.
recipe=3 # 2: uleds beside gpio-sim; 3: and i2c-stub
if [ -f "$stamp" ] && grep -q " recipe=$recipe\$" "$stamp"; then
	echo "lab: cache ready: $(cat "$stamp")" >&2
	echo "$cache"
	exit 0
fi

# What downloading the kernel and building gpio-sim runs.
"$(dirname "$0")/../deps.sh" lab >&2
[ "$arch" = amd64 ] || "$(dirname "$0")/../deps.sh" "lab-$arch" >&2

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
# The kernel Debian's linux-image-FLAVOUR points at now, and its source. On
# a machine whose package indexes were never fetched (or fetched before
# the architecture was added) apt knows no kernel.
meta="linux-image-$flavour:$deb"
kernel() { apt-cache depends "$meta" 2>/dev/null | awk '/Depends: linux-image-/ {sub(/:.*/, "", $2); print $2; exit}'; }
kpkg=$(kernel)
if [ -z "$kpkg" ]; then
	echo "lab: apt knows no $meta; fetching the package indexes" >&2
	$SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq || true
	kpkg=$(kernel)
fi
if [ -z "$kpkg" ]; then
	echo "lab: apt knows no $meta (Debian bookworm's main in the sources, and the $deb architecture added?)" >&2
	exit 1
fi
kver=${kpkg#linux-image-}                      # 6.1.0-48-amd64
abi=${kver%-"$flavour"}                         # 6.1.0-48
ver=$(apt-cache show "$kpkg:$deb" | awk '/^Version:/ {print $2; exit}')
echo "lab: kernel $kver ($ver, $deb)" >&2

host=$(dpkg --print-architecture)
dl="$cache/deb"
mkdir -p "$dl"
(
	cd "$dl"
	# The kernel and its headers are the machine's; the kbuild tools
	# (fixdep, modpost) run here, so they are this host's, of the same
	# version. An ARM machine's initramfs takes its own static busybox.
	pkgs="$kpkg:$deb linux-headers-$kver:$deb linux-headers-$abi-common linux-kbuild-6.1:$host linux-source-6.1"
	[ "$arch" = amd64 ] || pkgs="$pkgs busybox-static:$deb linux-kbuild-6.1:$deb"
	for p in $pkgs; do
		name=${p%%:*}
		a=${p#"$name"}
		ls "${name}"_*"${a:+_${a#:}}".deb >/dev/null 2>&1 || apt-get download "$p=$ver" >&2 2>/dev/null || apt-get download "$p" >&2 || {
			echo "lab: $p could not be downloaded for the $arch lab" >&2
			exit 1
		}
	done
)
root="$cache/root"
rm -rf "$root" && mkdir -p "$root"
for p in "$dl/$kpkg"_*.deb "$dl/linux-headers-$kver"_*.deb "$dl/linux-headers-$abi-common"_*.deb "$dl"/linux-kbuild-6.1_*_"$host".deb; do
	dpkg -x "$p" "$root"
done
if [ "$arch" != amd64 ]; then
	# modpost checks a module's device tables against the sizes of the
	# kernel's structures, which are compiled into it: the host's knows
	# amd64's, and on an armhf module fails ("sizeof(struct
	# of_device_id)=200 is not a modulo of the size of section
	# __mod_of__..._device_table=392": ARM's is 196). The architecture's
	# own modpost, from its linux-kbuild, runs under qemu-user instead
	# (called directly: its wrapper would exec it, which qemu-user cannot).
	kb="$cache/kbuild"
	rm -rf "$kb" && mkdir -p "$kb"
	dpkg -x "$dl"/linux-kbuild-6.1_*_"$deb".deb "$kb"
	bits=64
	[ "$deb" = armhf ] && bits=32
	mod="$root/usr/lib/linux-kbuild-6.1/scripts/mod"
	printf '#!/bin/sh\nexec %s "%s" "$@"\n' "$user" "$kb/usr/lib/linux-kbuild-6.1/scripts/mod/modpost.real-lsb-$bits" > "$mod/modpost"
	chmod +x "$mod/modpost"
fi
cp "$root/boot/vmlinuz-$kver" "$cache/vmlinuz"
if [ "$arch" != amd64 ]; then
	rm -rf "$cache/busybox" && mkdir -p "$cache/busybox"
	dpkg -x "$dl"/busybox-static_*.deb "$cache/busybox"
	cp "$cache/busybox/bin/busybox" "$cache/busybox.static" && rm -rf "$cache/busybox"
fi
# The headers name their compiler (gcc-12 for 6.1, which deps.sh installs;
# for ARM, Debian's cross compiler of that version).
cc=$(sed -n 's/^CC = .*(CROSS_COMPILE)\([^ ]*\)$/\1/p' "$root/usr/src/linux-headers-$kver/.kernelvariables")
if ! command -v "$cross${cc:-gcc}" >/dev/null 2>&1; then
	echo "lab: Debian's $flavour kernel headers build with $cross${cc:-gcc}, which is not installed" >&2
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
	'*/drivers/gpio/gpio-sim.c' '*/drivers/gpio/gpiolib.h' '*/kernel/irq/irq_sim.c' '*/drivers/leds/uleds.c' '*/drivers/i2c/i2c-stub.c'
rm -rf "$cache/source"
mv "$src/drivers/gpio/gpio-sim.c" "$src/drivers/gpio/gpiolib.h" "$src/kernel/irq/irq_sim.c" "$src/drivers/leds/uleds.c" "$src/drivers/i2c/i2c-stub.c" "$src/"
rm -rf "$src/drivers" "$src/kernel"
# irq_to_desc is not exported by Debian's kernel.
sed -i 's/handle_simple_irq(irq_to_desc(\([a-z_]*\)))/generic_handle_irq(\1)/' "$src/irq_sim.c"
if grep -q 'irq_to_desc' "$src/irq_sim.c"; then
	echo "lab: irq_sim.c still calls irq_to_desc; the patch for Debian's kernel no longer applies" >&2
	exit 1
fi
# uleds makes LED class devices from user space (/dev/uleds): a real LED
# for the lab, with the kernel's LED core behind it (brightness, triggers),
# since the VM has no LED and Debian builds no uleds (CONFIG_LEDS_USER).
# i2c-stub, an SMBus adapter of registers, Debian builds for amd64 only;
# the lab builds its own, i2c-stublab, for every machine alike.
cat > "$src/Makefile" <<'MK'
obj-m := gpio-simlab.o uleds.o i2c-stublab.o
gpio-simlab-y := gpio-sim.o irq_sim.o
i2c-stublab-y := i2c-stub.o
MK
# shellcheck disable=SC2086
make -s -C "$root/usr/src/linux-headers-$kver" M="$src" ${karch:+ARCH=$karch CROSS_COMPILE=$cross} modules >&2
# The module goes in the kernel's tree, and modules.dep is made for the
# initramfs's modprobe.
mkdir -p "$root/lib/modules/$kver/extra"
cp "$src/gpio-simlab.ko" "$src/uleds.ko" "$src/i2c-stublab.ko" "$root/lib/modules/$kver/extra/"
PATH="$PATH:/sbin:/usr/sbin" depmod -b "$root" "$kver"

# The source package (139 MB) served its files.
rm -f "$dl"/linux-source-6.1_*.deb

echo "$kver $(date -u +%Y-%m-%dT%H:%M:%SZ) recipe=$recipe" > "$stamp"
echo "lab: cache ready in $cache" >&2
echo "$cache"
