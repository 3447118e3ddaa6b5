package hal

// Drivers is one set of openers, one per kind of device. The composition
// root picks a set for the board (the simulated board, or the Linux
// drivers) and every consumer opens devices through it. A nil opener means
// the set has no driver for that kind; a consumer reports the device as
// not available rather than failing.
type Drivers struct {
	// Name says which set this is ("sim", "linux").
	Name string

	OpenChip     func(label string) (Chip, error)
	OpenCamera   func(CameraConfig) (Camera, error)
	OpenCapture  func(AudioConfig) (AudioCapture, error)
	OpenPlayback func(AudioConfig) (AudioPlayback, error)
	OpenInput    func(InputConfig) (InputDevice, error)
	// WatchInputs reports input devices as they are plugged and unplugged.
	WatchInputs func() (InputWatcher, error)
	// OpenI2C opens an I²C bus by its name or number ("1", "I2C1",
	// "/dev/i2c-1").
	OpenI2C func(bus string) (I2CBus, error)
	// OpenLED takes over one of the board's own LEDs by its name in
	// /sys/class/leds ("ACT").
	OpenLED func(name string) (LED, error)
}
