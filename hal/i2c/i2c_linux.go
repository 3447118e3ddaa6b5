package i2c

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	periphi2c "periph.io/x/conn/v3/i2c"
	"periph.io/x/conn/v3/i2c/i2creg"
	"periph.io/x/conn/v3/physic"

	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/internal/uapi"
	"github.com/tobe-body/tobe-body/hal/periphhost"
)

// sysfsRoot is where adapters' names are read.
const sysfsRoot = "/sys/bus/i2c/devices"

// Open opens the bus named name. A bus this machine does not have is
// hal.ErrAbsent, with the buses it has; an adapter that can do neither
// plain I²C nor SMBus register transfers is hal.ErrUnsupported.
func Open(name string) (hal.I2CBus, error) {
	if _, err := periphhost.Init(); err != nil {
		return nil, fmt.Errorf("I²C bus %q: %w", name, err)
	}
	refs := i2creg.All()
	ref := find(refs, name)
	if ref == nil {
		have := make([]string, 0, len(refs))
		for _, r := range refs {
			have = append(have, fmt.Sprintf("%d (%s)", r.Number, adapterName(r.Number)))
		}
		why := "none: is i2c-dev loaded and the bus enabled?"
		if len(have) > 0 {
			why = strings.Join(have, ", ")
		}
		return nil, fmt.Errorf("I²C bus %q: not on this machine (buses here: %s): %w", name, why, hal.ErrAbsent)
	}
	n := ref.Number
	label := fmt.Sprintf("I2C%d", n)
	if a := adapterName(n); a != "" {
		label += " (" + a + ")"
	}
	f, err := os.OpenFile(fmt.Sprintf("/dev/i2c-%d", n), os.O_RDWR, 0)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("I²C bus %s: %v: %w", label, err, hal.ErrAbsent)
		}
		return nil, fmt.Errorf("I²C bus %s: %w", label, err)
	}
	var funcs uintptr
	if err := uapi.FileIoctl(f, uapi.I2CFuncs, unsafe.Pointer(&funcs)); err != nil {
		f.Close()
		return nil, fmt.Errorf("I²C bus %s: %w", label, os.NewSyscallError("I2C_FUNCS", err))
	}
	switch {
	case funcs&uapi.I2CFuncI2C != 0:
		f.Close()
		b, err := ref.Open()
		if err != nil {
			return nil, fmt.Errorf("I²C bus %s: %w", label, err)
		}
		return &plain{bus: b, label: label}, nil
	case funcs&uapi.I2CFuncSMBusRegisterAccess == uapi.I2CFuncSMBusRegisterAccess:
		return &smbus{f: f, label: label, addr: -1}, nil
	}
	f.Close()
	return nil, fmt.Errorf("I²C bus %s: its adapter does neither plain I²C nor SMBus register transfers (functionality %#x): %w", label, funcs, hal.ErrUnsupported)
}

// find returns the bus registered as name: by number, periph's name or
// alias, or the adapter's name.
func find(refs []*i2creg.Ref, name string) *i2creg.Ref {
	want := strings.TrimSpace(name)
	if want == "" {
		return nil
	}
	if n, err := strconv.Atoi(strings.TrimPrefix(want, "i2c-")); err == nil {
		for _, r := range refs {
			if r.Number == n {
				return r
			}
		}
		return nil
	}
	for _, r := range refs {
		if r.Name == want || slices.Contains(r.Aliases, want) {
			return r
		}
	}
	for _, r := range refs {
		if adapterName(r.Number) == want {
			return r
		}
	}
	return nil
}

// adapterName is the kernel's name of bus n's adapter, or "".
func adapterName(n int) string {
	b, err := os.ReadFile(filepath.Join(sysfsRoot, fmt.Sprintf("i2c-%d", n), "name"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// plain is periph's sysfs bus, its errors naming the bus and address.
type plain struct {
	bus   periphi2c.BusCloser
	label string
}

func (p *plain) String() string                    { return p.label }
func (p *plain) Close() error                      { return p.bus.Close() }
func (p *plain) SetSpeed(f physic.Frequency) error { return p.bus.SetSpeed(f) }

func (p *plain) Tx(addr uint16, w, r []byte) error {
	if err := p.bus.Tx(addr, w, r); err != nil {
		return fmt.Errorf("%s address %#02x: %w", p.label, addr, err)
	}
	return nil
}

// smbus is an SMBus-only adapter, its Tx mapped onto register transfers.
type smbus struct {
	label string

	mu   sync.Mutex
	f    *os.File
	addr int // the address I2C_SLAVE last set, or -1
}

func (s *smbus) String() string { return s.label }

func (s *smbus) SetSpeed(physic.Frequency) error {
	return fmt.Errorf("%s: an SMBus adapter's clock is not set from here: %w", s.label, hal.ErrUnsupported)
}

func (s *smbus) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	return err
}

// Tx maps one transaction onto SMBus transfers: w a register and r the
// bytes to read from it (an I²C block read, 32 bytes at a time); w a
// register and the bytes to write to it (a byte-data write for one, an
// I²C block write for more); w a single byte and no read (a byte write);
// a read of one byte with nothing written (a byte read). Anything else is
// hal.ErrUnsupported.
func (s *smbus) Tx(addr uint16, w, r []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.tx(addr, w, r); err != nil {
		return fmt.Errorf("%s address %#02x: %w", s.label, addr, err)
	}
	return nil
}

func (s *smbus) tx(addr uint16, w, r []byte) error {
	if s.f == nil {
		return hal.ErrClosed
	}
	if addr > 0x7f {
		return fmt.Errorf("not a 7-bit address: %w", hal.ErrUnsupported)
	}
	if s.addr != int(addr) {
		if err := uapi.FileIoctlValue(s.f, uapi.I2CSlave, uintptr(addr)); err != nil {
			if errors.Is(err, syscall.EBUSY) {
				return fmt.Errorf("a kernel driver holds the address (unbind it first): %w", os.NewSyscallError("I2C_SLAVE", err))
			}
			return os.NewSyscallError("I2C_SLAVE", err)
		}
		s.addr = int(addr)
	}
	switch {
	case len(w) == 1 && len(r) > 0:
		reg := int(w[0])
		for off := 0; off < len(r); off += uapi.I2CSMBusBlockMax {
			n := min(len(r)-off, uapi.I2CSMBusBlockMax)
			if reg+off > 0xff {
				return fmt.Errorf("a read of %d bytes from register %#02x runs past register 0xff", len(r), w[0])
			}
			var d uapi.I2CSMBusData
			d[0] = byte(n)
			if err := s.transfer(uapi.I2CSMBusRead, byte(reg+off), uapi.I2CSMBusI2CBlockData, &d); err != nil {
				return err
			}
			if int(d[0]) != n {
				return fmt.Errorf("an I²C block read of %d bytes from register %#02x returned %d", n, reg+off, d[0])
			}
			copy(r[off:off+n], d[1:1+n])
		}
		return nil
	case len(w) == 2 && len(r) == 0:
		var d uapi.I2CSMBusData
		d[0] = w[1]
		return s.transfer(uapi.I2CSMBusWrite, w[0], uapi.I2CSMBusByteData, &d)
	case len(w) > 2 && len(r) == 0:
		if len(w)-1 > uapi.I2CSMBusBlockMax {
			return fmt.Errorf("an I²C block write of %d bytes: at most %d over SMBus: %w", len(w)-1, uapi.I2CSMBusBlockMax, hal.ErrUnsupported)
		}
		var d uapi.I2CSMBusData
		d[0] = byte(len(w) - 1)
		copy(d[1:], w[1:])
		return s.transfer(uapi.I2CSMBusWrite, w[0], uapi.I2CSMBusI2CBlockData, &d)
	case len(w) == 1 && len(r) == 0:
		return s.transfer(uapi.I2CSMBusWrite, w[0], uapi.I2CSMBusByte, nil)
	case len(w) == 0 && len(r) == 1:
		var d uapi.I2CSMBusData
		if err := s.transfer(uapi.I2CSMBusRead, 0, uapi.I2CSMBusByte, &d); err != nil {
			return err
		}
		r[0] = d[0]
		return nil
	case len(w) == 0 && len(r) == 0:
		return nil
	}
	return fmt.Errorf("a transaction writing %d bytes and reading %d is not an SMBus transfer: %w", len(w), len(r), hal.ErrUnsupported)
}

func (s *smbus) transfer(rw, cmd byte, size uint32, d *uapi.I2CSMBusData) error {
	arg := uapi.I2CSMBusIoctlData{ReadWrite: rw, Command: cmd, Size: size, Data: unsafe.Pointer(d)}
	if err := uapi.FileIoctl(s.f, uapi.I2CSMBus, unsafe.Pointer(&arg)); err != nil {
		return os.NewSyscallError("I2C_SMBUS", err)
	}
	return nil
}
