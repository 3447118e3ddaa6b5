package cli

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/board"
	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/body/config"
)

// Config is 'tobe-body config': check a file, show the layers' result,
// print the schema.
func Config(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return UsageError("config: want a subcommand: check FILE, show, or schema")
	}
	switch args[0] {
	case "check":
		fs := flag.NewFlagSet("tobe-body config check", flag.ContinueOnError)
		fs.SetOutput(stderr)
		boardName := fs.String("board", "", "also check the names of outputs and controls against this board `NAME`")
		pos, err := Parse(fs, args[1:], 1)
		if err != nil {
			return err
		}
		if len(pos) != 1 {
			return UsageError("config check: want one FILE")
		}
		if err := config.CheckFile(pos[0]); err != nil {
			return &ExitError{Code: 1, Err: err}
		}
		if *boardName != "" {
			if err := checkAgainstBoard(pos[0], *boardName); err != nil {
				return &ExitError{Code: 1, Err: err}
			}
		}
		fmt.Fprintf(stdout, "%s: valid\n", pos[0])
		return nil
	case "show":
		return showConfig(args[1:], stdout, stderr)
	case "schema":
		if len(args) != 1 {
			return UsageError("config schema: unexpected argument %q", args[1])
		}
		_, err := stdout.Write(config.SchemaJSON())
		return err
	}
	return UsageError("config: unknown subcommand %q (want check, show or schema)", args[0])
}

// showConfig prints the configuration the layers and flags make, as JSON,
// with the layers it came from; secrets print as [redacted].
func showConfig(args []string, stdout, stderr io.Writer) error {
	var c Common
	fs := NewFlagSet("config show", stderr, &c, false)
	section := fs.String("section", "", "print only this top-level key (act, sense, ...)")
	if _, err := Parse(fs, args, 0); err != nil {
		return err
	}
	cfg, err := c.LoadConfig()
	if err != nil {
		return &ExitError{Code: 1, Err: err}
	}
	var out any = struct {
		Layers []string      `json:"layers"`
		Config config.Config `json:"config"`
	}{cfg.Layers, cfg.Config}
	if *section != "" {
		var all map[string]json.RawMessage
		b, err := json.Marshal(cfg.Config)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, &all); err != nil {
			return err
		}
		v, ok := all[*section]
		if !ok {
			return UsageError("config show: no section %q", *section)
		}
		out = v
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// checkAgainstBoard checks what the file's act section names (outputs,
// the people's controls and their resources) against a board profile, as
// the daemon does at start; channel ids and capabilities are checked only
// there, where the channels and the runner exist.
func checkAgainstBoard(path, name string) error {
	l, err := config.Load(config.Sources{File: path})
	if err != nil {
		return err
	}
	set, err := board.LoadSet(board.UserDir)
	if err != nil {
		return err
	}
	p, err := set.Get(name)
	if err != nil {
		return err
	}
	_, err = act.NewSettings(l.Act, body.FactsOf(p), nil)
	return err
}
