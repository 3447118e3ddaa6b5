package main

import "github.com/tobe-body/tobe-body/hal"

// hotplug is a profile input that takes every device as it comes
// ("match": "*"): the watcher the devices opened for it, read by a sense
// hotplug channel.
type hotplug struct {
	id   string
	w    hal.InputWatcher
	open func(hal.InputConfig) (hal.InputDevice, error)
}
