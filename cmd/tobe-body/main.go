// Package main is the tobe-body command, the body runtime of a personal
// agent: one binary with subcommands, and the composition root that builds
// every component once and wires them together.
//
//	tobe-body run                 the daemon, in the foreground
//	tobe-body status [--json]     ask the running daemon how it is
//	tobe-body board [--json]      the board profile and each device's state
//	tobe-body config check FILE   check a config file against the schema
//	tobe-body config show         the configuration the layers make
//	tobe-body config schema       print the config schema
//	tobe-body version             version, commit, board and build tags
//	tobe-body ledger ...          stats, verify, backup, events, compact
//	tobe-body estop ...           status, trip, reset
//	tobe-body grant ...           add, list, revoke what principals may do
//	tobe-body approvals           R3 actions waiting for approval
//	tobe-body approve|deny ID     approve or deny one of them
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/tobe-body/tobe-body/awareness/admin"
	"github.com/tobe-body/tobe-body/body/config"
)

// Set with -ldflags -X by the Makefile.
var (
	version    = "dev"
	commit     = "unknown"
	buildBoard = "auto" // the board an image was built for
	buildTags  = ""     // build tags that change behaviour (portaudio, ...)
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first signal asks for a clean stop; once it has, the signals go
	// back to their defaults, so a second Ctrl-C kills a stop that hangs.
	context.AfterFunc(ctx, stop)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// exitError carries an exit code; its message, if any, is printed.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

func usageError(format string, args ...any) error {
	return &exitError{code: 2, err: fmt.Errorf(format, args...)}
}

// exitCode prints err and returns the process's exit status.
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	code := 1
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
		if ee.err == nil {
			return code
		}
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintln(stderr, "tobe-body:", err)
	return code
}

const usage = `usage: tobe-body <command> [flags]

commands:
  run                  run the body in the foreground
  status [--json]      ask the running body how it is
  board [--json]       show the board profile and each device's state
  config check FILE    check a config file against the schema (--board NAME: and its names)
  config show          print the configuration the layers make (--section act)
  config schema        print the config schema (JSON Schema 2020-12)
  version              print version, commit, board and build tags
  ledger <command>     stats, verify, backup FILE|-, events, compact
  estop <command>      status, trip (stop now), reset (a local administrator, line healthy)
  do CAP TARGET k=v    act as a local administrator through the runner (gpio.set, gpio.pulse; --list)
  grant <command>      add, list, revoke: what principals may do
  work <command>       list, show, close: the work items the agent left on the body
  wait <command>       list, add, remove: what the body waits for, for them
  gate explain ID      why the agent was woken for an event, or was not
  approvals [--json]   the R3 actions waiting for a local administrator's approval
  approve ACTION_ID    approve one of them: it runs now, with the policy checked again
  deny ACTION_ID       deny it (--why TEXT): it is cancelled
  stdio                the agent's bridge (an SSH forced command): MCP on stdin and stdout
                       to DIR/agent.sock (--principal NAME narrows it)

common flags:
  --data DIR           data directory (default /var/lib/tobe-body)
  --board NAME         board profile, or auto (default from config: auto)
  --config FILE        config file over /etc/tobe-body/config.json
  --socket PATH        the daemon's admin socket (default DIR/admin.sock)

Run 'tobe-body <command> --help' for a command's flags.
`

// run is main without the process: every subcommand is tested through it.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return &exitError{code: 2}
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "run":
		return runDaemon(ctx, rest, stdout, stderr)
	case "status":
		return runStatus(ctx, rest, stdout, stderr)
	case "board":
		return runBoard(ctx, rest, stdout, stderr)
	case "config":
		return runConfig(rest, stdout, stderr)
	case "version":
		return runVersion(rest, stdout, stderr)
	case "ledger":
		return runLedger(ctx, rest, stdout, stderr)
	case "estop":
		return runEStop(ctx, rest, stdout, stderr)
	case "do":
		return runDo(ctx, rest, stdout, stderr)
	case "grant":
		return runGrant(ctx, rest, stdout, stderr)
	case "work":
		return runWork(ctx, rest, stdout, stderr)
	case "wait":
		return runWait(ctx, rest, stdout, stderr)
	case "gate":
		return runGate(ctx, rest, stdout, stderr)
	case "approvals":
		return runApprovals(ctx, rest, stdout, stderr)
	case "approve", "deny":
		return runDecide(ctx, cmd, rest, stdout, stderr)
	case "stdio":
		return runStdio(ctx, rest, stdin, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return usageError("unknown command %q", cmd)
}

// common holds the flags every command shares.
type common struct {
	data, board, config, socket string
}

func newFlagSet(name string, stderr io.Writer, c *common, withSocket bool) *flag.FlagSet {
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

// parse parses flags, before or after the positional arguments, and
// refuses more than maxArgs of those. It returns the positional arguments.
func parse(fs *flag.FlagSet, args []string, maxArgs int) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, &exitError{code: 2}
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if maxArgs >= 0 && len(pos) > maxArgs {
		return nil, usageError("%s: unexpected argument %q", fs.Name(), pos[maxArgs])
	}
	return pos, nil
}

// loadConfig reads the layers with the common flags on top.
func (c *common) loadConfig() (*config.Loaded, error) {
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
func (c *common) client(timeout time.Duration) (*admin.Client, error) {
	path, err := c.socketPath()
	if err != nil {
		return nil, err
	}
	return &admin.Client{Path: path, Timeout: timeout}, nil
}

// socketPath is --socket, or admin.sock in the data directory: --data, or
// the configured one. Config layers this user may not read are skipped.
func (c *common) socketPath() (string, error) {
	switch {
	case c.socket != "":
		return c.socket, nil
	case c.data != "":
		return filepath.Join(c.data, adminSocket), nil
	}
	src := config.DeviceSources()
	src.File, src.Lenient = c.config, true
	cfg, err := config.Load(src)
	if err != nil {
		return "", err
	}
	return filepath.Join(cfg.DataDir, adminSocket), nil
}
