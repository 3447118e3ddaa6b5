//go:build !linux

package main

import "errors"

func evict(string) error { return errors.New("-cold: the page cache can be dropped only on Linux") }
