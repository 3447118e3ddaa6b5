package main

import (
	"fmt"
	"io"

	"github.com/tobe-body/tobe-body/body/config"
)

func runConfig(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError("config: want a subcommand: check FILE, or schema")
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
	case "schema":
		if len(args) != 1 {
			return usageError("config schema: unexpected argument %q", args[1])
		}
		_, err := stdout.Write(config.SchemaJSON())
		return err
	}
	return usageError("config: unknown subcommand %q (want check or schema)", args[0])
}
