// Package main is uinput, the system lab's input device: it makes a uinput
// keypad with the name given (the lab board profile matches
// tobe-lab-keypad), then presses and releases each key named on a line
// of its standard input (KEY_ENTER, KEY_1, ...), printing "pressed KEY"
// after each, until its input ends; then the device goes.
//
//	uinput NAME <keys
package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/holoplot/go-evdev"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "uinput:", err)
		os.Exit(1)
	}
}

func run() error {
	if len(os.Args) != 2 {
		return fmt.Errorf("usage: uinput NAME <keys")
	}
	name := os.Args[1]
	keys := []evdev.EvCode{evdev.KEY_ENTER, evdev.KEY_ESC}
	for c := evdev.EvCode(evdev.KEY_1); c <= evdev.KEY_0; c++ {
		keys = append(keys, c)
	}
	dev, err := evdev.CreateDevice(name, evdev.InputID{BusType: 0x06, Vendor: 1, Product: 2, Version: 1},
		map[evdev.EvType][]evdev.EvCode{evdev.EV_KEY: keys})
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	defer evdev.DestroyDevice(dev)
	fmt.Printf("made %s at %s\n", name, dev.Path())
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		key := strings.TrimSpace(in.Text())
		if key == "" {
			continue
		}
		code, ok := evdev.KEYFromString[key]
		if !ok {
			return fmt.Errorf("no key %q", key)
		}
		for _, v := range []int32{1, 0} {
			ev := []evdev.InputEvent{{Type: evdev.EV_KEY, Code: code, Value: v}, {Type: evdev.EV_SYN, Code: evdev.SYN_REPORT}}
			for i := range ev {
				if err := dev.WriteOne(&ev[i]); err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		fmt.Printf("pressed %s\n", key)
	}
	return in.Err()
}
