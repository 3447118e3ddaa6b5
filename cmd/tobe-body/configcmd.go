package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/tobe-body/tobe-body/body/config"
)

func runConfig(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError("config: want a subcommand: check FILE, show, or schema")
	}
	switch args[0] {
	case "check":
		if len(args) != 2 {
			return usageError("config check: want one FILE")
		}
		if err := config.CheckFile(args[1]); err != nil {
			return &exitError{code: 1, err: err}
		}
		fmt.Fprintf(stdout, "%s: valid\n", args[1])
		return nil
	case "show":
		return showConfig(args[1:], stdout, stderr)
	case "schema":
		if len(args) != 1 {
			return usageError("config schema: unexpected argument %q", args[1])
		}
		_, err := stdout.Write(config.SchemaJSON())
		return err
	}
	return usageError("config: unknown subcommand %q (want check, show or schema)", args[0])
}

// showConfig prints the configuration the layers and flags make, as JSON,
// with the layers it came from; secrets print as [redacted].
func showConfig(args []string, stdout, stderr io.Writer) error {
	var c common
	fs := newFlagSet("config show", stderr, &c, false)
	section := fs.String("section", "", "print only this top-level key (act, sense, ...)")
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	cfg, err := c.loadConfig()
	if err != nil {
		return &exitError{code: 1, err: err}
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
			return usageError("config show: no section %q", *section)
		}
		out = v
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
