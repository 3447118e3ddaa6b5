#!/bin/sh
# Runs inside the system lab VM (scripts/lab/system.sh), as root, under
# systemd as PID 1: sets up the virtual hardware, installs the body with
# install.sh from the release tree in /opt/tobe-body, and checks what the
# unit promises against the real systemd and kernel drivers. Each claim
# prints "lab-system: ok ..." or "lab-system: FAIL ...", with the lines
# that show it; then a summary line, and the VM powers off.
set -u
pass=0 fail=0
ok() { echo "lab-system: ok   $*"; pass=$((pass + 1)); }
bad() { echo "lab-system: FAIL $*"; fail=$((fail + 1)); }
ms() { echo $((($(date +%s%N) - $1) / 1000000)); }
show() { sed 's/^/lab-system:      | /'; }
# restarted waits until systemd runs the body again, as a process other
# than PID $1.
restarted() {
	while [ "$(systemctl show -p MainPID --value tobe-body)" = "$1" ] || [ "$(systemctl is-active tobe-body)" != active ]; do
		sleep 0.05
	done
}

# The virtual hardware: gpio-sim with the lab profile's lines, vivid,
# uinput, snd-aloop, softdog.
for m in configfs gpio-simlab evdev uinput vivid snd-aloop softdog; do
	modprobe "$m" || bad "modprobe $m"
done
mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config
lab-gpio-sim || bad "the gpio-sim chip"
udevadm settle
set -- /sys/devices/platform/gpio-sim.*/gpiochip*
sim=$1
# The normally-closed e-stop and its second contact healthy (closed: low),
# the reset button released (high). Once the body has requested the lines
# (with its own bias) again.
healthy() {
	echo pull-down >"$sim/sim_gpio0/pull"
	echo pull-down >"$sim/sim_gpio1/pull"
	echo pull-up >"$sim/sim_gpio2/pull"
}
healthy

# install.sh, as on a board that runs Debian.
if (cd /opt/tobe-body && ./install.sh --no-start) >/tmp/install.log 2>&1; then
	ok "install.sh installed the body"
	show </tmp/install.log
else
	bad "install.sh"
	show </tmp/install.log
fi
groups=" $(id -nG tobe-body) "
missing=""
for g in gpio video audio input; do
	case $groups in *" $g "*) ;; *) missing="$missing $g" ;; esac
done
if [ -z "$missing" ]; then
	ok "the user tobe-body is in its devices' groups:$groups"
else
	bad "the user tobe-body is not in$missing:$groups"
fi
set -- /dev/gpiochip*
chip=$1
if [ "$(stat -c %G:%a "$chip")" = gpio:660 ]; then
	ok "udev gives the GPIO chips to gpio: $(ls -l "$chip")"
else
	bad "the GPIO chip: $(ls -l "$chip")"
fi

# The lab board; the VM's clock is not synchronised, which R3 and relative
# grants wait for: not what this run is about.
cat >/etc/tobe-body/config.json <<'JSON'
{"version": 1, "board": "lab", "act": {"safety": {"unsynced_clock_refuse_from": "never"}}}
JSON

# Start: systemctl start returns when the unit sent READY=1.
t=$(date +%s%N)
if systemctl start tobe-body; then
	ok "the unit is $(systemctl is-active tobe-body) with READY=1 $(ms "$t") ms after systemctl start ($(systemctl show -p StatusText --value tobe-body))"
else
	bad "systemctl start tobe-body"
	journalctl -u tobe-body --no-pager | tail -20 | show
fi
pid=$(systemctl show -p MainPID --value tobe-body)

# The hardening in force: the root is read-only for the service, its
# state directory is not; a device it is not allowed cannot be opened from
# its cgroup, one it is allowed can.
if nsenter -t "$pid" -m sh -c 'touch /etc/tobe-body/x' 2>/tmp/ro.err; then
	bad "the service could write /etc"
else
	ok "the service cannot write outside its directories: $(cat /tmp/ro.err)"
fi
if nsenter -t "$pid" -m sh -c 'touch /var/lib/tobe-body/.w && rm /var/lib/tobe-body/.w'; then
	ok "the service writes its state directory"
else
	bad "the service cannot write its state directory"
fi
cg=/sys/fs/cgroup$(cut -d: -f3 "/proc/$pid/cgroup")
if sh -c "echo \$\$ >$cg/cgroup.procs; exec dd if=/dev/vda of=/dev/null bs=512 count=1" 2>/tmp/dev.err; then
	bad "the service's cgroup opened /dev/vda"
else
	ok "the service's cgroup cannot open a device it is not allowed: /dev/vda: $(grep -o 'Operation not permitted' /tmp/dev.err | head -n 1)"
fi
if sh -c "echo \$\$ >$cg/cgroup.procs; exec head -c 0 $chip" 2>/tmp/dev.err; then
	ok "the service's cgroup opens $chip"
else
	bad "the service's cgroup cannot open $chip: $(cat /tmp/dev.err)"
fi

# The devices, opened through DeviceAllow and the groups: each channel
# Loaded and ok.
tobe-body status >/tmp/status.txt 2>&1
for ch in estop.second gpio.button gpio.relay1 camera.front audio.mic audio.speaker; do
	line=$(grep "^$ch " /tmp/status.txt | tr -s ' ')
	case $line in
	*" Loaded enabled ok "*) ok "the body opened $ch: $line" ;;
	*) bad "the body's $ch: ${line:-not in the status}" ;;
	esac
done

# kill -9 with an output on: the line falls to its safe level as the
# process dies (the kernel releases it), stays there while systemd starts
# the body again (sampled every few ms across the restart), and the body
# starts with it safe.
# The body as it is now (the VM has no input devices, and its clock is
# not synchronised: what may run says so).
show </tmp/status.txt
healthy
sleep 1
tobe-body estop reset 2>&1 | show
tobe-body estop status 2>&1 | head -n 1 | show
# The LED: an R1 output, which a degraded body still drives.
if tobe-body "do" gpio.set gpio.led state=on >/tmp/do.log 2>&1 && [ "$(cat "$sim/sim_gpio7/value")" = 1 ]; then
	ok "the LED on before the kill: $(tail -n 1 /tmp/do.log)"
else
	bad "the LED on before the kill"
	show </tmp/do.log
fi
: >/tmp/samples
(
	end=$(($(date +%s) + 10))
	while [ "$(date +%s)" -lt "$end" ]; do
		echo "$(date +%s%N) $(cat "$sim/sim_gpio4/value" "$sim/sim_gpio6/value" "$sim/sim_gpio7/value" "$sim/sim_gpio8/value" | tr -d '\n')" >>/tmp/samples
	done
) &
sampler=$!
sleep 0.5
t=$(date +%s%N)
kill -9 "$pid"
gone=$(date +%s%N)
restarted "$pid"
again=$(ms "$t")
wait $sampler
before=$(awk -v t="$t" '$1 < t && $2 == "0010"' /tmp/samples | wc -l)
after=$(awk -v t="$gone" '$1 > t' /tmp/samples | wc -l)
high=$(awk -v t="$gone" '$1 > t && $2 != "0000"' /tmp/samples | wc -l)
first=$(awk -v t="$t" '$1 > t && $2 == "0000" {print int(($1 - t) / 1000); exit}' /tmp/samples)
if [ "$before" -gt 0 ] && [ "$after" -gt 0 ] && [ "$high" -eq 0 ]; then
	ok "after kill -9 with the LED on ($before samples on before it), every output read low in all $after samples after it (the first ${first} µs after the kill); systemd restarted the body (NRestarts=$(systemctl show -p NRestarts --value tobe-body)), active again $again ms after the kill"
else
	bad "outputs across the kill: $before samples with the LED on before it, $high of $after after it not all low"
fi
pid=$(systemctl show -p MainPID --value tobe-body)

# A latch set before a kill is set again after it.
healthy
tobe-body estop trip >/dev/null 2>&1
tobe-body estop status | head -n 1 | show
kill -9 "$pid"
restarted "$pid"
if tobe-body estop status | head -n 1 | grep -q 'latched when the body stopped'; then
	ok "the latch set before the kill is set again: $(tobe-body estop status | head -n 1 | tr -s ' ')"
else
	bad "the latch after the restart: $(tobe-body estop status | head -n 1)"
fi

echo "lab-system: $pass passed, $fail failed"
