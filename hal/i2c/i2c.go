// Package i2c opens I²C buses for the body: through periph.io/x/host/v3's
// bus registry (i2creg, which lists the kernel's i2c-dev buses), by
// number ("1"), periph's names ("I2C1", "/dev/i2c-1") or the adapter's
// own name in sysfs ("SMBus stub driver", "3180000.i2c").
//
// An adapter that speaks plain I²C (I2C_FUNC_I2C: a Raspberry Pi's, a
// Jetson's) is periph's sysfs bus, whose Tx is one combined transfer
// (I2C_RDWR). An adapter that speaks only SMBus (a PC's SMBus controller,
// the kernel's i2c-stub) cannot take I2C_RDWR at all (the kernel answers
// EOPNOTSUPP), so its Tx is mapped onto SMBus register transfers, which
// is what register-based devices use: a write of a register and a read
// of n bytes is an I²C block read (in pieces of 32), a write of a
// register and one byte is a byte-data write, and of more bytes an I²C
// block write. Either way a Tx's error names the bus and the address.
//
// Open is Linux's; elsewhere it fails with hal.ErrUnsupported.
package i2c
