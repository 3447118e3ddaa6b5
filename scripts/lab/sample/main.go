// Package main is sample, the system lab's output sampler: for the duration
// given it reads the files named (gpio-sim's sim_gpioN/value) every
// period and prints one line a sample, "UNIXNANOS VALUES", the values'
// first characters side by side ("0010"): much finer than a shell loop,
// which in a TCG VM takes a tenth of a second a sample.
//
//	sample DURATION PERIOD FILE [FILE ...]
package main

import (
	"bufio"
	"fmt"
	"os"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "sample:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) < 3 {
		return fmt.Errorf("usage: sample DURATION PERIOD FILE [FILE ...]")
	}
	d, err := time.ParseDuration(args[0])
	if err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	period, err := time.ParseDuration(args[1])
	if err != nil {
		return fmt.Errorf("period: %w", err)
	}
	files := make([]*os.File, 0, len(args)-2)
	for _, name := range args[2:] {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		files = append(files, f)
	}
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	buf := make([]byte, 8)
	line := make([]byte, 0, 64)
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(period) {
		line = fmt.Appendf(line[:0], "%d ", time.Now().UnixNano())
		for _, f := range files {
			// sysfs gives the value again from offset 0.
			n, err := f.ReadAt(buf, 0)
			if n == 0 {
				return fmt.Errorf("%s: %v", f.Name(), err)
			}
			line = append(line, buf[0])
		}
		line = append(line, '\n')
		if _, err := out.Write(line); err != nil {
			return err
		}
	}
	return nil
}
