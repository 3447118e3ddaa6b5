// Package led takes over the board's own LEDs (/sys/class/leds: a Pi's
// ACT and PWR, a Jetson's power LED) through periph.io/x/host/v3's sysfs
// LED driver, as hal.LineOut outputs: on is High, the safe level Low
// (off).
//
// Taking an LED switches its kernel trigger to "none" (a Pi's ACT LED
// otherwise follows the SD card, mmc0), so that only the body drives it;
// Close switches it off and gives it its trigger back. periph writes the
// brightness (255 for on, which the kernel caps at the LED's
// max_brightness, 0 for off); the read-back reads the brightness file
// itself, because periph's Read turns a read that failed into "off",
// which a verification must not take for an LED that is off.
//
// Open is Linux's; elsewhere it fails with hal.ErrUnsupported.
package led
