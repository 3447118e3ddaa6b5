#!/bin/sh
# Boots the hardware lab VM and runs the lab tests in it: Debian's kernel
# under QEMU (TCG), an initramfs with busybox, the virtual-hardware modules
# (gpio-sim, vivid, uinput, evdev, snd-aloop, softdog, i2c-stub with
# i2c-dev, uleds with the timer trigger) and the test
# binaries of the packages given (built with the lab tag; those with audio
# tests with cgo and PortAudio; one with a driver of its own for a build
# without cgo, once more without it). Prints what the tests print, then a summary,
# and exits non-zero on any failure. Only the lab tests (TestLab*) run in
# the VM; the unit tests run on the host, where their packages' sources are.
# The VM has LAB_SMP CPUs (2 by default: the target boards have four, and
# the e-stop's reader needs a P that CPU-heavy work leaves free) and an
# ext4 disk on virtio at /data (LAB_DISK in the tests' environment): an
# fsync there reaches a block device, unlike one in the initramfs.
# LAB_ARCH names the machine (scripts/lab/prepare.sh): amd64 (the default,
# qemu-system-x86_64's pc machine), arm64 (qemu-system-aarch64's virt
# machine with a Cortex-A72, a Raspberry Pi 4's core) or armv7
# (qemu-system-arm's virt with a Cortex-A15 and Debian's armmp-lpae
# kernel). An ARM machine's test binaries are the cross builds, cgo and
# PortAudio included, made with Debian's cross compilers; its busybox is
# the architecture's.
#
#   scripts/lab/run.sh ./hal/probe
#   LAB_SMP=1 scripts/lab/run.sh ./act
#   LAB_RUN=ClockSteps scripts/lab/run.sh ./cmd/tobe-body
#   LAB_ARCH=arm64 scripts/lab/run.sh ./hal/gpio
set -eu
cd "$(dirname "$0")/../.."
[ $# -gt 0 ] || set -- ./hal/probe
arch=${LAB_ARCH:-amd64}
# Go's target, the C cross compiler's triplet, the dynamic loader, the
# emulator that runs a binary here, and the machine.
case $arch in
amd64)
	goenv="GOARCH=amd64" triplet=x86_64-linux-gnu user="" console=ttyS0 limit=600
	qemu="qemu-system-x86_64 -accel tcg"
	;;
arm64)
	goenv="GOARCH=arm64" triplet=aarch64-linux-gnu user="qemu-aarch64-static -L /" console=ttyAMA0 limit=1800
	qemu="qemu-system-aarch64 -accel tcg,thread=multi -M virt -cpu cortex-a72"
	;;
armv7)
	goenv="GOARCH=arm GOARM=7" triplet=arm-linux-gnueabihf user="qemu-arm-static -L /" console=ttyAMA0 limit=1800
	qemu="qemu-system-arm -accel tcg,thread=multi -M virt,highmem=off -cpu cortex-a15"
	;;
*)
	echo "lab: LAB_ARCH=$arch: want amd64, arm64 or armv7" >&2
	exit 2
	;;
esac
# What the lab runs on the host, PortAudio's development files for the
# audio tests included: installed when missing, quiet when there.
scripts/deps.sh lab
[ "$arch" = amd64 ] || scripts/deps.sh "lab-$arch"
cache=$(LAB_ARCH=$arch scripts/lab/prepare.sh | tail -n 1)
kver=$(cut -d' ' -f1 "$cache/prepared")
cc="CC=$triplet-gcc"
[ "$arch" = amd64 ] && cc=""
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ir="$work/initramfs"
mkdir -p "$ir/bin" "$ir/lab" "$ir/proc" "$ir/sys" "$ir/dev" "$ir/tmp" "$ir/lib/modules/$kver"

if [ "$arch" = amd64 ]; then
	cp /bin/busybox "$ir/bin/busybox"
else
	cp "$cache/busybox.static" "$ir/bin/busybox"
fi
install -m 0755 scripts/lab/gpio-sim.sh "$ir/bin/lab-gpio-sim"
for a in sh mount mkdir echo cat ls modprobe poweroff sleep grep; do ln -s busybox "$ir/bin/$a"; done

# The modules the lab loads, with what they depend on.
mods="gpio-simlab evdev uinput vivid snd-aloop softdog i2c-dev i2c-stublab uleds ledtrig-timer virtio_pci virtio_mmio virtio_blk crc32c_generic ext4"
kdir="$cache/root/lib/modules/$kver"
cp "$kdir"/modules.dep "$kdir"/modules.dep.bin "$kdir"/modules.alias "$kdir"/modules.builtin "$kdir"/modules.order "$ir/lib/modules/$kver/" 2>/dev/null || true
for m in $mods; do
	if ! line=$(grep -E "(^|/)${m}\.ko(\.xz)?:" "$kdir/modules.dep"); then
		if grep -qE "(^|/)${m}\.ko$" "$kdir/modules.builtin"; then
			continue # built into this kernel
		fi
		echo "lab: the $kver kernel has no module $m" >&2
		exit 1
	fi
	for f in $(echo "$line" | tr -d ':'); do
		mkdir -p "$ir/lib/modules/$kver/$(dirname "$f")"
		cp "$kdir/$f" "$ir/lib/modules/$kver/$f"
	done
done

# The shared libraries a binary loads, as ldd lists them: for another
# architecture its own dynamic loader lists them, under qemu-user.
libs() {
	if [ -z "$user" ]; then
		ldd "$1"
		return
	fi
	# shellcheck disable=SC2086
	loader=$(file -b "$1" | sed -n 's/.*interpreter \([^,]*\),.*/\1/p')
	# shellcheck disable=SC2086
	$user "$loader" --list "$1"
}

# The tests, one binary per package, with cgo and static where they can be
# (the e-stop's tripwire thread in hal/gpio is C). A package
# whose lab tests need PortAudio (their build line names the portaudio
# tag: hal/audio, sense) is built with cgo and the tag, and brings its shared
# libraries (ldd, the dynamic loader included) and ALSA's configuration.
# A binary without a single lab test is refused rather than run: a tag
# left out would otherwise pass by testing nothing.
bins=0
for pkg in "$@"; do
	name=$(echo "$pkg" | sed 's|/*$||' | tr '/.' '__' | sed 's/^_*//')
	bin="$ir/lab/$name.test"
	if grep -qs '^//go:build.*portaudio' "$pkg"/*lab_test.go; then
		if ! pkg-config --exists portaudio-2.0 2>/dev/null; then
			echo "lab: $pkg needs PortAudio's development files for its lab tests, and scripts/deps.sh lab did not install them" >&2
			exit 1
		fi
		# shellcheck disable=SC2086
		env -u GOARM CGO_ENABLED=1 $goenv $cc PKG_CONFIG_LIBDIR="/usr/lib/$triplet/pkgconfig:/usr/share/pkgconfig" \
			go test -c -tags lab,portaudio -o "$bin" "$pkg"
		for lib in $(libs "$bin" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}'); do
			mkdir -p "$ir$(dirname "$lib")"
			cp -L "$lib" "$ir$lib"
		done
		if [ ! -d "$ir/usr/share/alsa" ]; then
			mkdir -p "$ir/usr/share"
			cp -a /usr/share/alsa "$ir/usr/share/alsa"
		fi
	else
		# cgo, linked statically: the e-stop's tripwire thread is C.
		# shellcheck disable=SC2086
		env -u GOARM CGO_ENABLED=1 $goenv $cc go test -c -tags lab,netgo,osusergo -ldflags '-linkmode external -extldflags -static' -o "$bin" "$pkg"
	fi
	# A package with a driver of its own for a build without cgo (a file
	# built only !cgo: hal/gpio's latch in Go) is tested that way too.
	tests="$bin"
	if grep -qs '^//go:build.*!cgo' "$pkg"/*.go; then
		# shellcheck disable=SC2086
		env -u GOARM CGO_ENABLED=0 $goenv go test -c -tags lab -o "$ir/lab/${name}_nocgo.test" "$pkg"
		tests="$tests $ir/lab/${name}_nocgo.test"
	fi
	for b in $tests; do
		bins=$((bins + 1))
		# shellcheck disable=SC2086
		if ! $user "$b" -test.list '^TestLab' | grep -q '^TestLab'; then
			echo "lab: $pkg has no lab tests in its binary $(basename "$b") (build tags?)" >&2
			exit 1
		fi
	done
done

cat > "$ir/init" <<'INIT'
#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
# /dev/shm as on any system: libjack, which PortAudio loads, keeps a
# database there and has libdb complain on stderr when it cannot.
mkdir -p /dev/shm && mount -t tmpfs shm /dev/shm
for m in configfs gpio-simlab evdev uinput vivid snd-aloop softdog i2c-dev uleds ledtrig-timer virtio_pci virtio_blk crc32c_generic ext4; do modprobe $m || echo "lab: modprobe $m failed"; done
# An SMBus adapter of registers a test writes: a BME280 at 0x76.
modprobe i2c-stublab chip_addr=0x76 || echo "lab: modprobe i2c-stublab failed"
mkdir -p /data && mount -t ext4 /dev/vda /data && export LAB_DISK=/data || echo "lab: no data disk"
mount -t configfs none /sys/kernel/config
/bin/lab-gpio-sim || echo "lab: the gpio-sim chip could not be made"
echo "lab: devices ready on $(uname -srm)"
for t in /lab/*.test; do
	echo "lab: run $t"
	$t -test.v -test.count=1 -test.run "$(cat /lab/run)" 2>&1
	echo "lab: exit $? $t"
done
poweroff -f
INIT
chmod +x "$ir/init"
# Which lab tests run: all of them, or those LAB_RUN names (a -test.run
# pattern, for working on one; always within TestLab*).
echo "^TestLab${LAB_RUN:+.*(}${LAB_RUN:-}${LAB_RUN:+)}" > "$ir/lab/run"
(cd "$ir" && find . | cpio -o -H newc 2>/dev/null | gzip -1) > "$work/initrd.gz"

# One VM run: a fresh data disk, the tests, the console in console.log.
# A kernel that locks up under emulation (the soft-lockup watchdog fires:
# a CPU of the VM stuck in the kernel, seen now and then under TCG on a
# loaded host) ends the run at once instead of at the time limit, and
# says so: lockup=1. QEMU itself is waited for, not a wrapper around it:
# the next run's QEMU cannot open the data disk while this one still
# holds its lock.
vm() {
	PATH="$PATH:/usr/sbin:/sbin" mkfs.ext4 -q -F "$work/data.img" 64M
	: > "$work/console.log"
	# shellcheck disable=SC2086
	$qemu -m 768 -smp "${LAB_SMP:-2}" -nographic -no-reboot \
		-kernel "$cache/vmlinuz" -initrd "$work/initrd.gz" \
		-drive file="$work/data.img",format=raw,if=virtio \
		-append "console=$console quiet panic=-1" > "$work/console.log" 2>&1 &
	pid=$!
	lockup=0
	end=$(( $(date +%s) + ${LAB_TIMEOUT:-$limit} ))
	while kill -0 "$pid" 2>/dev/null; do
		if grep -q 'BUG: soft lockup' "$work/console.log"; then
			lockup=1
			kill "$pid" 2>/dev/null || true
			break
		fi
		if [ "$(date +%s)" -ge "$end" ]; then
			echo "lab: the VM ran past its ${LAB_TIMEOUT:-$limit} s and was stopped" >&2
			kill "$pid" 2>/dev/null || true
			break
		fi
		sleep 2
	done
	wait "$pid" || true
}

start=$(date +%s)
vm
if [ "$lockup" -eq 1 ]; then
	tr -d '\r' < "$work/console.log" | grep -m 3 -e 'soft lockup' -e '^=== RUN' | sed 's/^/lab: /' || true
	echo "lab: the VM's kernel locked up (its soft-lockup watchdog fired): a fault of the emulated machine, not a test's; running the VM again, once"
	vm
	if [ "$lockup" -eq 1 ]; then
		echo "lab: the VM's kernel locked up again" >&2
	fi
fi
took=$(( $(date +%s) - start ))
# The console as text: without carriage returns and the terminal resets
# the PC's firmware writes before the kernel's first line.
tr -d '\r' < "$work/console.log" | sed 's/\x1bc//g; s/\x1b\[[0-9;?]*[A-Za-z]//g' > "$work/console.txt"
# LAB_LOG keeps it (scripts/lab/figures.sh reads it).
[ -z "${LAB_LOG:-}" ] || cp "$work/console.txt" "$LAB_LOG"
sed -n '/^lab: /,$p' "$work/console.txt" | grep -v '^lab: run' || true
pass=$(grep -c -- '^--- PASS' "$work/console.txt" || true)
fail=$(grep -c -- '^--- FAIL' "$work/console.txt" || true)
bad=$(grep -c '^lab: exit [1-9]' "$work/console.txt" || true)
ran=$(grep -c '^lab: exit' "$work/console.txt" || true)
echo "lab: $pass passed, $fail failed, $ran test binaries ($bad failed) in a ${took}s VM run ($arch, Linux $kver)"
[ "$fail" -eq 0 ] && [ "$bad" -eq 0 ] && [ "$ran" -eq "$bins" ] && [ "$lockup" -eq 0 ]
