// Package cli is the tobe-body command's client side: every subcommand
// but run (the daemon), each a function of its arguments and its output
// (status, board, config, version, ledger, estop, do, grant, work, wait,
// gate, approvals, approve and deny, stdio), and what they and the
// daemon share: the common flags, the config's layers under them, the
// board and its drivers, the admin socket's name, and the errors that
// carry an exit status.
//
// The commands talk to the running daemon over its admin socket (a few
// open the ledger when none runs), or to its agent socket (stdio).
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/tobe-body/tobe-body/awareness/admin"
	"github.com/tobe-body/tobe-body/board"
	"github.com/tobe-body/tobe-body/body/config"
	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/audio"
	v4l2 "github.com/tobe-body/tobe-body/hal/camera"
	"github.com/tobe-body/tobe-body/hal/gpio"
	"github.com/tobe-body/tobe-body/hal/i2c"
	"github.com/tobe-body/tobe-body/hal/input"
	"github.com/tobe-body/tobe-body/hal/led"
	"github.com/tobe-body/tobe-body/hal/probe"
	"github.com/tobe-body/tobe-body/hal/sim"
)

// AdminSocket is the admin socket's name in the data directory.
const AdminSocket = "admin.sock"

// ExitError carries an exit code; its message, if any, is printed.
type ExitError struct {
	Code int
	Err  error // nil: nothing is printed
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// Exit is an error that ends the command with code and prints nothing.
func Exit(code int) error { return &ExitError{Code: code} }

// UsageError is an error of the command line: it is printed, and the
// command exits 2.
func UsageError(format string, args ...any) error {
	return &ExitError{Code: 2, Err: fmt.Errorf(format, args...)}
}

// ExitCode prints err and returns the process's exit status: 0 for nil
// and for a --help, the code an error carries, else 1.
func ExitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	code := 1
	var ee *ExitError
	if errors.As(err, &ee) {
		code = ee.Code
		if ee.Err == nil {
			return code
		}
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintln(stderr, "tobe-body:", err)
	return code
}

// Common holds the flags every command shares.
type Common struct {
	data, board, config, socket string
}

// NewFlagSet is a command's flag set with the common flags on c, and
// --socket when withSocket.
func NewFlagSet(name string, stderr io.Writer, c *Common, withSocket bool) *flag.FlagSet {
	fs := flag.NewFlagSet("tobe-body "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.data, "data", "", "data `DIR` (default from config: /var/lib/tobe-body)")
	fs.StringVar(&c.board, "board", "", "board profile `NAME`, or auto")
	fs.StringVar(&c.config, "config", "", "config `FILE` over /etc/tobe-body/config.json")
	if withSocket {
		fs.StringVar(&c.socket, "socket", "", "the daemon's admin socket `PATH` (default DIR/admin.sock)")
	}
	return fs
}

// Parse parses flags, before or after the positional arguments, and
// refuses more than maxArgs of those (no limit when negative). It returns
// the positional arguments.
func Parse(fs *flag.FlagSet, args []string, maxArgs int) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, &ExitError{Code: 2}
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if maxArgs >= 0 && len(pos) > maxArgs {
		return nil, UsageError("%s: unexpected argument %q", fs.Name(), pos[maxArgs])
	}
	return pos, nil
}

// LoadConfig reads the layers with the common flags on top.
func (c *Common) LoadConfig() (*config.Loaded, error) {
	src := config.DeviceSources()
	src.File = c.config
	src.Flags = map[string]any{}
	if c.board != "" {
		src.Flags["board"] = c.board
	}
	if c.data != "" {
		abs, err := filepath.Abs(c.data)
		if err != nil {
			return nil, fmt.Errorf("--data %s: %w", c.data, err)
		}
		src.Flags["data_dir"] = abs
	}
	return config.Load(src)
}

// client is the admin socket's client, with a call timeout (0: 5 s).
func (c *Common) client(timeout time.Duration) (*admin.Client, error) {
	path, err := c.socketPath()
	if err != nil {
		return nil, err
	}
	return &admin.Client{Path: path, Timeout: timeout}, nil
}

// socketPath is --socket, or admin.sock in the data directory: --data, or
// the configured one. Config layers this user may not read are skipped.
func (c *Common) socketPath() (string, error) {
	switch {
	case c.socket != "":
		return c.socket, nil
	case c.data != "":
		return filepath.Join(c.data, AdminSocket), nil
	}
	src := config.DeviceSources()
	src.File, src.Lenient = c.config, true
	cfg, err := config.Load(src)
	if err != nil {
		return "", err
	}
	return filepath.Join(cfg.DataDir, AdminSocket), nil
}

// ResolveBoard picks the board's profile (cfg.Board) and applies the
// config's choice of the LEDs the body takes (act.leds); it returns the
// profile and how it was chosen.
func ResolveBoard(cfg *config.Config) (*board.Profile, string, error) {
	p, why, err := board.Resolve(cfg.Board)
	if err != nil {
		return nil, "", err
	}
	p, err = p.TakeLEDs(cfg.Act.LEDs)
	return p, why, err
}

// DriversFor returns the driver set a profile asks for, and the finder
// of its kernel devices (nil for the simulator's).
func DriversFor(p *board.Profile, c config.Sim) (hal.Drivers, board.Finder) {
	if p.Drivers == "sim" {
		return sim.NewPressing(c.Seed, time.Duration(c.ButtonPeriodMS)*time.Millisecond).Drivers(), nil
	}
	return hal.Drivers{Name: "linux", OpenChip: gpio.Open, OpenCamera: v4l2.Open, OpenCapture: audio.OpenCapture, OpenPlayback: audio.OpenPlayback,
		OpenInput: input.Open, WatchInputs: input.Watch, OpenI2C: i2c.Open, OpenLED: led.Open}, probe.Finder{Root: "/"}
}
