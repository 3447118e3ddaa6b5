#!/bin/sh
# The system lab (make lab-system): the body installed and run as a
# systemd service on a Debian root, in a VM with the lab's kernel and its
# virtual hardware (gpio-sim, vivid, uinput, snd-aloop, softdog). The root
# is made by mmdebstrap (Debian bookworm, minbase with systemd as PID 1,
# udev and the body's runtime libraries; cached beside the lab's kernel),
# the body's release tree (scripts/stage.sh and install.sh, as in a
# tarball of make dist, with the binary built with the labfaults tag for
# the watchdog's faults) is put in /opt/tobe-body, with the image's
# watchdog setting (buildroot/board/tobe's system.conf.d), and a unit runs
# scripts/lab/system-check.sh at each boot.
#
# The VM boots twice. The first boot checks the unit, then loads the body
# and prints each acknowledged action; the power is cut (QEMU killed) a
# while into the load. The second boot, with those acknowledgements on a
# second disk, checks the ledger, uninstalls, and ends with systemd
# frozen until softdog resets the VM. Each boot's lines are printed, then
# the host's own checks and a summary ("lab-system: N passed, M failed");
# it exits non-zero on a failure.
#
#   scripts/lab/system.sh
set -eu
cd "$(dirname "$0")/../.."
scripts/deps.sh lab
cache=$(scripts/lab/prepare.sh | tail -n 1)
kver=$(cut -d' ' -f1 "$cache/prepared")
kdir=$cache/root/lib/modules/$kver
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The Debian root, made once.
pkgs=systemd-sysv,udev,kmod,util-linux,passwd,libportaudio2,libasound2
root_tar=$cache/system-root-$(echo "$pkgs" | md5sum | cut -c1-8).tar
if [ ! -f "$root_tar" ]; then
	echo "lab-system: making the Debian root (mmdebstrap: $pkgs)"
	# (mmdebstrap writes a tarball for a name that ends in .tar)
	mmdebstrap --quiet --variant=minbase --include="$pkgs" bookworm "$cache/making.tar"
	mv "$cache/making.tar" "$root_tar"
fi
root=$work/root
mkdir -p "$root"
tar -C "$root" -xf "$root_tar"
mkdir -p "$root/lib/modules"
cp -a "$kdir" "$root/lib/modules/"

# The body as a release tarball has it.
CGO_ENABLED=1 go build -trimpath -tags portaudio,labfaults -ldflags "-X main.buildTags=portaudio,labfaults" -o "$work/tobe-body" ./cmd/tobe-body
scripts/stage.sh "$root/opt/tobe-body" "$work/tobe-body"
install -m 0755 scripts/install.sh "$root/opt/tobe-body/install.sh"
install -m 0755 scripts/lab/system-check.sh "$root/usr/local/sbin/lab-system-check"
install -m 0755 scripts/lab/gpio-sim.sh "$root/usr/local/sbin/lab-gpio-sim"
CGO_ENABLED=0 go build -trimpath -o "$root/usr/local/sbin/lab-uinput" ./scripts/lab/uinput
CGO_ENABLED=0 go build -trimpath -o "$root/usr/local/sbin/lab-sample" ./scripts/lab/sample
# systemd feeds the watchdog device as on the image.
install -D -m 0644 buildroot/board/tobe/rootfs-overlay/etc/systemd/system.conf.d/watchdog.conf "$root/etc/systemd/system.conf.d/watchdog.conf"
cat >"$root/etc/systemd/system/lab-system.service" <<'UNIT'
[Unit]
Description=The system lab's checks
After=multi-user.target
[Service]
Type=oneshot
# What the checks printed is on the console: power off at once after
# (the first boot ends with the power cut, the second with softdog).
ExecStart=/bin/sh -c '/usr/local/sbin/lab-system-check; sync; systemctl poweroff -ff'
StandardOutput=tty
StandardError=tty
TTYPath=/dev/ttyS0
TimeoutStartSec=900
[Install]
WantedBy=multi-user.target
UNIT
ln -sf /etc/systemd/system/lab-system.service "$root/etc/systemd/system/multi-user.target.wants/lab-system.service"
# Quiet consoles: no getty on the serial line the checks print to.
ln -sf /dev/null "$root/etc/systemd/system/serial-getty@ttyS0.service"
PATH="$PATH:/usr/sbin:/sbin" mkfs.ext4 -q -F -d "$root" "$work/root.img" 1G

# An initramfs that loads the disk's modules and softdog (there when
# systemd starts, which opens the watchdog device then) and hands over to
# systemd.
ir=$work/initramfs
mkdir -p "$ir/bin" "$ir/proc" "$ir/sys" "$ir/dev" "$ir/newroot" "$ir/lib/modules/$kver"
cp /bin/busybox "$ir/bin/busybox"
for a in sh mount modprobe switch_root; do ln -s busybox "$ir/bin/$a"; done
cp "$kdir"/modules.dep "$kdir"/modules.dep.bin "$kdir"/modules.alias "$kdir"/modules.builtin "$kdir"/modules.order "$ir/lib/modules/$kver/" 2>/dev/null || true
for m in virtio_pci virtio_blk crc32c_generic ext4 softdog; do
	for f in $(grep -E "(^|/)${m}\.ko(\.xz)?:" "$kdir/modules.dep" | tr -d ':'); do
		mkdir -p "$ir/lib/modules/$kver/$(dirname "$f")"
		cp "$kdir/$f" "$ir/lib/modules/$kver/$f"
	done
done
cat >"$ir/init" <<'INIT'
#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in virtio_pci virtio_blk crc32c_generic ext4 softdog; do modprobe $m; done
mount -t ext4 /dev/vda /newroot
exec switch_root /newroot /lib/systemd/systemd
INIT
chmod +x "$ir/init"
(cd "$ir" && find . | cpio -o -H newc 2>/dev/null | gzip -1) >"$work/initrd.gz"

boot() { # N, drives...: runs the VM in the background, its console in console-N.log
	n=$1
	shift
	qemu-system-x86_64 -accel tcg -m 1024 -smp "${LAB_SMP:-2}" -nographic -no-reboot \
		-kernel "$cache/vmlinuz" -initrd "$work/initrd.gz" "$@" \
		-append "console=ttyS0 quiet panic=-1 systemd.show_status=false" >"$work/console-$n.log" 2>&1 &
	qemu=$!
}
# alive tells whether the VM runs, for at most $1 more seconds from $2.
alive() { kill -0 "$qemu" 2>/dev/null && [ "$(date +%s)" -lt $(($2 + $1)) ]; }
host_pass=0 host_fail=0
hok() { echo "lab-system: ok   $*"; host_pass=$((host_pass + 1)); }
hbad() { echo "lab-system: FAIL $*"; host_fail=$((host_fail + 1)); }
lines() { grep 'lab-system' "$1" | grep -v '^lab-system: ack ' | tr -d '\r' || true; }

# The first boot, then the power cut a while into its load.
boot 1 -drive file="$work/root.img",format=raw,if=virtio
start=$(date +%s)
while alive "${LAB_SYSTEM_TIMEOUT:-600}" "$start" && ! grep -q 'lab-system: load running' "$work/console-1.log"; do sleep 0.5; done
loaded=$(date +%s)
while alive "${LAB_POWER_CUT_AFTER:-30}" "$loaded"; do sleep 0.5; done
if kill -9 "$qemu" 2>/dev/null; then
	wait "$qemu" || true
	grep -oE 'lab-system: ack [0-9a-f-]{36}' "$work/console-1.log" | cut -d' ' -f3 >"$work/acks.txt" || true
	lines "$work/console-1.log"
	hok "the power cut: QEMU killed $(($(date +%s) - loaded)) s into the load, after $(wc -l <"$work/acks.txt") acknowledged actions (the last: $(tail -n 1 "$work/acks.txt"))"
else
	wait "$qemu" || true
	lines "$work/console-1.log"
	hbad "the first boot ended before the power cut; its console:"
	tail -n 40 "$work/console-1.log" >&2
fi

# The second boot, with the acknowledgements on a second disk; it ends
# when softdog resets the VM.
mkdir -p "$work/acks"
cp "$work/acks.txt" "$work/acks/acks.txt"
PATH="$PATH:/usr/sbin:/sbin" mkfs.ext4 -q -F -d "$work/acks" "$work/acks.img" 4M
boot 2 -drive file="$work/root.img",format=raw,if=virtio -drive file="$work/acks.img",format=raw,if=virtio
start=$(date +%s)
while alive "${LAB_SYSTEM_TIMEOUT:-600}" "$start"; do sleep 0.5; done
if kill -9 "$qemu" 2>/dev/null; then
	hbad "the second boot did not end within ${LAB_SYSTEM_TIMEOUT:-600} s"
fi
wait "$qemu" || true
lines "$work/console-2.log"
reset=$(grep -m 1 'softdog: Initiating system reboot' "$work/console-2.log" | tr -d '\r')
frozen=$(grep -o 'systemd frozen for [0-9]* ms' "$work/console-2.log" | tail -n 1)
if [ -n "$reset" ] && [ -n "$frozen" ]; then
	hok "softdog reset the VM with systemd frozen (the last line before it: $frozen): $reset"
else
	hbad "softdog did not reset the VM (${frozen:-systemd never frozen}); the console's end:"
	tail -n 20 "$work/console-2.log" | tr -d '\r' >&2
fi
[ -z "${LAB_CONSOLE:-}" ] || cat "$work/console-1.log" "$work/console-2.log" >"$LAB_CONSOLE"

# The summary: each boot's and the host's.
pass=$host_pass fail=$host_fail
for n in 1 2; do
	b=$(grep -o "lab-system: boot $n: [0-9]* passed, [0-9]* failed" "$work/console-$n.log" | tail -n 1)
	if [ -z "$b" ]; then
		echo "lab-system: boot $n gave no summary"
		fail=$((fail + 1))
		continue
	fi
	pass=$((pass + $(echo "$b" | cut -d' ' -f4)))
	fail=$((fail + $(echo "$b" | cut -d' ' -f6)))
done
echo "lab-system: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
