#!/bin/sh
# Makes the lab's gpio-sim chips: tobe-lab, with the lines the lab board
# profile names (board/profiles/lab.json), in that order, and tobe-lab2,
# a second chip for the tests of outputs on two chips, whose line HOGGED
# the kernel holds (a hog, driven high), so a request of it is refused.
# Run in the lab VMs (scripts/lab/run.sh's initramfs,
# scripts/lab/system.sh's Debian root) with configfs mounted at
# /sys/kernel/config and the gpio-sim module loaded.
set -eu
# chip NAME LINE...: a chip labelled NAME with 16 lines, the first named.
chip() {
	c=/sys/kernel/config/gpio-sim/$1
	shift
	mkdir -p $c/bank0
	echo 16 >$c/bank0/num_lines
	basename $c >$c/bank0/label
	i=0
	for n in "$@"; do
		mkdir $c/bank0/line$i
		echo $n >$c/bank0/line$i/name
		if [ $n = HOGGED ]; then
			mkdir $c/bank0/line$i/hog
			echo lab-hog >$c/bank0/line$i/hog/name
			echo output-high >$c/bank0/line$i/hog/direction
		fi
		i=$((i + 1))
	done
	echo 1 >$c/live
}
chip tobe-lab ESTOP ESTOP2 RESET BUTTON RELAY1 RELAY1_FB RELAY2 LED BUZZER PRIVACY
chip tobe-lab2 RELAY3 RELAY4 HOGGED SPARE SPARE2
