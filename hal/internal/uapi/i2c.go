package uapi

import "unsafe"

// I²C and SMBus through i2c-dev (linux/i2c-dev.h, linux/i2c.h). Their
// requests are plain numbers, not _IOC encodings.

// Requests on /dev/i2c-N.
const (
	I2CSlave      = 0x0703 // the address the next SMBus transfers go to
	I2CSlaveForce = 0x0706 // the same, even when a kernel driver holds the address
	I2CFuncs      = 0x0705 // the adapter's functionality, an unsigned long
	I2CRdwr       = 0x0707 // combined I²C messages (struct i2c_rdwr_ioctl_data)
	I2CSMBus      = 0x0720 // one SMBus transfer (struct i2c_smbus_ioctl_data)
)

// Functionality bits (I2C_FUNC_*) that the drivers look for.
const (
	I2CFuncI2C                 = 0x00000001
	I2CFuncSMBusReadByte       = 0x00020000
	I2CFuncSMBusWriteByte      = 0x00040000
	I2CFuncSMBusReadByteData   = 0x00080000
	I2CFuncSMBusWriteByteData  = 0x00100000
	I2CFuncSMBusReadI2CBlock   = 0x04000000
	I2CFuncSMBusWriteI2CBlock  = 0x08000000
	I2CFuncSMBusRegisterAccess = I2CFuncSMBusReadByteData | I2CFuncSMBusWriteByteData | I2CFuncSMBusReadI2CBlock | I2CFuncSMBusWriteI2CBlock
)

// SMBus transfer directions and sizes (I2C_SMBUS_READ, I2C_SMBUS_BYTE, ...).
const (
	I2CSMBusWrite = 0
	I2CSMBusRead  = 1

	I2CSMBusByte         = 1
	I2CSMBusByteData     = 2
	I2CSMBusWordData     = 3
	I2CSMBusI2CBlockData = 8

	// I2CSMBusBlockMax is the most bytes one block transfer carries.
	I2CSMBusBlockMax = 32
)

// I2CSMBusData is union i2c_smbus_data: a byte, a word, or a block whose
// first byte is its length (I2C_SMBUS_BLOCK_MAX + 2 bytes).
type I2CSMBusData [I2CSMBusBlockMax + 2]byte

// I2CSMBusIoctlData is struct i2c_smbus_ioctl_data.
type I2CSMBusIoctlData struct {
	ReadWrite uint8
	Command   uint8
	Size      uint32
	Data      unsafe.Pointer // *I2CSMBusData
}
