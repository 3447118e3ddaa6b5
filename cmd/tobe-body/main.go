// Package main is the tobe-body command, the body runtime of a personal
// agent: one binary with subcommands, and the composition root. `run`
// builds every component of the daemon once, wires them together and
// starts them in phases; every other command is the client side, in
// internal/cli, dispatched from here.
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
//	tobe-body do CAP TARGET k=v   act as a local administrator through the runner
//	tobe-body grant ...           add, list, revoke what principals may do
//	tobe-body evidence ...        list, get, delete the snapshots and clips kept
//	tobe-body privacy ...         status, pause, resume the cameras and microphones
//	tobe-body work ...            list, show, close the agent's work items
//	tobe-body wait ...            list, add, remove wait conditions
//	tobe-body gate explain ID     why the agent was woken for an event, or not
//	tobe-body approvals           R3 actions waiting for approval
//	tobe-body approve|deny ID     approve or deny one of them
//	tobe-body stdio               the agent's bridge to the agent socket (MCP)
//	tobe-body help                the usage
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/tobe-body/tobe-body/cmd/tobe-body/internal/cli"
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
	os.Exit(cli.ExitCode(err, os.Stderr))
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
  evidence <command>   list, get ID FILE|-, delete: the snapshots and clips kept to be looked at
  privacy <command>    status, pause [--for D], resume: whether the cameras and microphones are paused
  work <command>       list, show, close: the work items the agent left on the body
  wait <command>       list, add, remove: what the body waits for, for them
  gate explain ID      why the agent was woken for an event, or was not
  world <command>      now, at, history, explain, tell, withdraw: what the body knows of its
                       surroundings, then and now, and the evidence
  approvals [--json]   the R3 actions waiting for a local administrator's approval
  approve ACTION_ID    approve one of them: it runs now, with the policy checked again
  deny ACTION_ID       deny it (--why TEXT): it is cancelled
  stdio                the agent's bridge (an SSH forced command): MCP on stdin and stdout
                       to DIR/agent.sock (--principal NAME narrows it)
  help                 print this

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
		return cli.Exit(2)
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "run":
		return runDaemon(ctx, rest, stdout, stderr)
	case "status":
		return cli.Status(ctx, rest, stdout, stderr)
	case "board":
		return cli.Board(ctx, rest, stdout, stderr)
	case "config":
		return cli.Config(rest, stdout, stderr)
	case "version":
		return cli.Version(rest, stdout, stderr, cli.Build{Version: version, Commit: commit, Board: buildBoard, Tags: buildTags})
	case "ledger":
		return cli.Ledger(ctx, rest, stdout, stderr)
	case "estop":
		return cli.EStop(ctx, rest, stdout, stderr)
	case "do":
		return cli.Do(ctx, rest, stdout, stderr)
	case "grant":
		return cli.Grant(ctx, rest, stdout, stderr)
	case "evidence":
		return cli.Evidence(ctx, rest, stdout, stderr)
	case "privacy":
		return cli.Privacy(ctx, rest, stdout, stderr)
	case "work":
		return cli.Work(ctx, rest, stdout, stderr)
	case "wait":
		return cli.Wait(ctx, rest, stdout, stderr)
	case "gate":
		return cli.Gate(ctx, rest, stdout, stderr)
	case "world":
		return cli.World(ctx, rest, stdout, stderr)
	case "approvals":
		return cli.Approvals(ctx, rest, stdout, stderr)
	case "approve", "deny":
		return cli.Decide(ctx, cmd, rest, stdout, stderr)
	case "stdio":
		return cli.Stdio(ctx, rest, stdin, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return cli.UsageError("unknown command %q", cmd)
}
