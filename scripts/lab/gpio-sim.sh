#!/bin/sh
# Makes the lab's gpio-sim chip, labelled tobe-lab, with the lines the lab
# board profile names (board/profiles/lab.json), in that order: run in
# the lab VMs (scripts/lab/run.sh's initramfs, scripts/lab/system.sh's
# Debian root) with configfs mounted at /sys/kernel/config and the
# gpio-sim module loaded.
set -eu
c=/sys/kernel/config/gpio-sim/tobe-lab
mkdir -p $c/bank0
echo 16 >$c/bank0/num_lines
echo tobe-lab >$c/bank0/label
i=0
for n in ESTOP ESTOP2 RESET BUTTON RELAY1 RELAY1_FB RELAY2 LED BUZZER PRIVACY; do
	mkdir $c/bank0/line$i
	echo $n >$c/bank0/line$i/name
	i=$((i + 1))
done
echo 1 >$c/live
