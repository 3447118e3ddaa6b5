#!/bin/sh
# The system lab (make lab-system): the body installed and run as a
# systemd service on a Debian root, in a VM with the lab's kernel and its
# virtual hardware (gpio-sim, vivid, uinput, snd-aloop, softdog). The root
# is made by mmdebstrap (Debian bookworm, minbase with systemd as PID 1,
# udev and the body's runtime libraries; cached beside the lab's kernel),
# the body's release tree (scripts/stage.sh and install.sh, as in a
# tarball of make dist) is put in /opt/tobe-body, and a unit runs
# scripts/lab/system-check.sh at boot, then powers off. Its lines are
# printed, with a summary ("lab-system: N passed, M failed"); it exits
# non-zero on a failure.
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
CGO_ENABLED=1 go build -trimpath -tags portaudio -ldflags "-X main.buildTags=portaudio" -o "$work/tobe-body" ./cmd/tobe-body
scripts/stage.sh "$root/opt/tobe-body" "$work/tobe-body"
install -m 0755 scripts/install.sh "$root/opt/tobe-body/install.sh"
install -m 0755 scripts/lab/system-check.sh "$root/usr/local/sbin/lab-system-check"
install -m 0755 scripts/lab/gpio-sim.sh "$root/usr/local/sbin/lab-gpio-sim"
cat >"$root/etc/systemd/system/lab-system.service" <<'UNIT'
[Unit]
Description=The system lab's checks
After=multi-user.target
[Service]
Type=oneshot
# What the checks printed is on the console: power off at once after.
ExecStart=/bin/sh -c '/usr/local/sbin/lab-system-check; sync; systemctl poweroff -ff'
StandardOutput=tty
StandardError=tty
TTYPath=/dev/ttyS0
TimeoutStartSec=300
[Install]
WantedBy=multi-user.target
UNIT
ln -sf /etc/systemd/system/lab-system.service "$root/etc/systemd/system/multi-user.target.wants/lab-system.service"
# Quiet consoles: no getty on the serial line the checks print to.
ln -sf /dev/null "$root/etc/systemd/system/serial-getty@ttyS0.service"
PATH="$PATH:/usr/sbin:/sbin" mkfs.ext4 -q -F -d "$root" "$work/root.img" 1G

# An initramfs that loads the disk's modules and hands over to systemd.
ir=$work/initramfs
mkdir -p "$ir/bin" "$ir/proc" "$ir/sys" "$ir/dev" "$ir/newroot" "$ir/lib/modules/$kver"
cp /bin/busybox "$ir/bin/busybox"
for a in sh mount modprobe switch_root; do ln -s busybox "$ir/bin/$a"; done
cp "$kdir"/modules.dep "$kdir"/modules.dep.bin "$kdir"/modules.alias "$kdir"/modules.builtin "$kdir"/modules.order "$ir/lib/modules/$kver/" 2>/dev/null || true
for m in virtio_pci virtio_blk crc32c_generic ext4; do
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
for m in virtio_pci virtio_blk crc32c_generic ext4; do modprobe $m; done
mount -t ext4 /dev/vda /newroot
exec switch_root /newroot /lib/systemd/systemd
INIT
chmod +x "$ir/init"
(cd "$ir" && find . | cpio -o -H newc 2>/dev/null | gzip -1) >"$work/initrd.gz"

timeout "${LAB_SYSTEM_TIMEOUT:-300}" qemu-system-x86_64 -accel tcg -m 1024 -smp "${LAB_SMP:-2}" -nographic -no-reboot \
	-kernel "$cache/vmlinuz" -initrd "$work/initrd.gz" \
	-drive file="$work/root.img",format=raw,if=virtio \
	-append "console=ttyS0 quiet panic=-1 systemd.show_status=false" >"$work/console.log" 2>&1 || true
grep 'lab-system' "$work/console.log" | tr -d '\r' || true
[ -z "${LAB_CONSOLE:-}" ] || cp "$work/console.log" "$LAB_CONSOLE"
summary=$(grep -o 'lab-system: [0-9]* passed, [0-9]* failed' "$work/console.log" | tail -n 1)
if [ -z "$summary" ]; then
	echo "lab-system: the VM gave no summary; its console:" >&2
	tail -40 "$work/console.log" >&2
	exit 1
fi
echo "$summary" | grep -q ' 0 failed$'
