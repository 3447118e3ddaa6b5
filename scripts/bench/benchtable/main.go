// Package main is benchtable, the table of scripts/bench/run.sh (make
// bench, make bench-smoke): it reads the figure lines each bench printed
// into its log and prints one table of every figure against its goal,
// with the machine's cores and the load each bench ran under.
//
//	benchtable -dir DIR
//
// DIR holds, for each bench NAME that ran, NAME.log (what it printed)
// and NAME.status (`exit=N seconds=S load=L`, written by run.sh), and a
// file benches listing the names in the order they ran. It exits 1 when
// a bench exited non-zero, printed no figure, or printed a figure line
// that cannot be read, and names which; a goal not met is shown, never
// a failure (the machines are shared and noisy).
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/tobe-body/tobe-body/scripts/bench/figure"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
}

// bench is what one bench left in the run's directory.
type bench struct {
	name    string
	status  status
	figures []figure.Figure
	bad     []string // figure lines that could not be read, with why
	tail    []string // the log's last lines, for a bench that failed
}

type status struct {
	exit    int
	seconds float64
	load    string
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("benchtable", flag.ContinueOnError)
	dir := fs.String("dir", "", "the run's directory (run.sh's)")
	title := fs.String("title", "make bench", "what ran, for the table's first line")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return errors.New("-dir: the run's directory")
	}
	names, err := lines(filepath.Join(*dir, "benches"))
	if err != nil {
		return err
	}
	if len(names) == 0 {
		return errors.New("no bench ran")
	}
	var benches []bench
	for _, n := range names {
		b, err := read(*dir, n)
		if err != nil {
			return err
		}
		benches = append(benches, b)
	}
	loads, _ := lines(filepath.Join(*dir, "load"))
	failed := table(out, *title, benches, loads)
	if len(failed) > 0 {
		return fmt.Errorf("%d of %d benches failed: %s", len(failed), len(benches), strings.Join(failed, "; "))
	}
	return nil
}

func read(dir, name string) (bench, error) {
	b := bench{name: name}
	st, err := os.ReadFile(filepath.Join(dir, name+".status"))
	if err != nil {
		return b, fmt.Errorf("%s: no status: %w", name, err)
	}
	if b.status, err = parseStatus(string(st)); err != nil {
		return b, fmt.Errorf("%s.status: %w", name, err)
	}
	f, err := os.Open(filepath.Join(dir, name+".log"))
	if err != nil {
		return b, fmt.Errorf("%s: no log: %w", name, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		b.tail = append(b.tail, line)
		if len(b.tail) > 15 {
			b.tail = b.tail[1:]
		}
		i := strings.Index(line, figure.Prefix)
		if i < 0 {
			continue
		}
		fig, err := figure.Parse(line[i:])
		if err != nil {
			b.bad = append(b.bad, err.Error())
			continue
		}
		b.figures = append(b.figures, fig)
	}
	if err := sc.Err(); err != nil {
		return b, fmt.Errorf("%s.log: %w", name, err)
	}
	return b, nil
}

// parseStatus reads `exit=N seconds=S load=L`.
func parseStatus(s string) (status, error) {
	st := status{exit: -1, seconds: math.NaN()}
	for _, w := range strings.Fields(s) {
		k, v, _ := strings.Cut(w, "=")
		var err error
		switch k {
		case "exit":
			st.exit, err = strconv.Atoi(v)
		case "seconds":
			st.seconds, err = strconv.ParseFloat(v, 64)
		case "load":
			st.load = v
		default:
			err = errors.New("unknown field")
		}
		if err != nil {
			return st, fmt.Errorf("%q: %v", w, err)
		}
	}
	if st.exit < 0 {
		return st, fmt.Errorf("%q: no exit status", strings.TrimSpace(s))
	}
	return st, nil
}

// table writes the table and returns the benches that failed, each with
// why.
func table(out io.Writer, title string, benches []bench, loads []string) []string {
	fmt.Fprintf(out, "%s: %d cores, %s %s/%s", title, runtime.NumCPU(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if len(loads) > 0 {
		fmt.Fprintf(out, "; load average (1, 5, 15 min) %s at the start", loads[0])
		if len(loads) > 1 {
			fmt.Fprintf(out, ", %s at the end", loads[len(loads)-1])
		}
	}
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "bench\tfigure\tvalue\tunit\tpeer\tvs\tratio\tgoal\tmet\tload\tsecs")
	var failed []string
	goals, met, figures := 0, 0, 0
	for _, b := range benches {
		secs := "-"
		if !math.IsNaN(b.status.seconds) {
			secs = strconv.FormatFloat(b.status.seconds, 'f', 0, 64)
		}
		for i, f := range b.figures {
			figures++
			m, ok := f.Met()
			mark := "-"
			if ok {
				goals++
				mark = "NO"
				if m {
					met++
					mark = "yes"
				}
			}
			load, s := "", ""
			if i == 0 {
				load, s = b.status.load, secs
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", b.name, f.Name, num(f.Value), f.Unit, num(f.Peer), dash(f.Vs),
				num(f.Ratio), f.Goal, mark, load, s)
		}
		switch {
		case b.status.exit != 0:
			failed = append(failed, fmt.Sprintf("%s exited with status %d", b.name, b.status.exit))
		case len(b.figures) == 0:
			failed = append(failed, fmt.Sprintf("%s printed no figure", b.name))
		}
		if len(b.bad) > 0 {
			failed = append(failed, fmt.Sprintf("%s printed %d figure lines that cannot be read (%s)", b.name, len(b.bad), b.bad[0]))
		}
		if b.status.exit != 0 || len(b.figures) == 0 {
			fmt.Fprintf(tw, "%s\t(failed: exit status %d, %d figures)\t\t\t\t\t\t\t\t%s\t%s\n", b.name, b.status.exit, len(b.figures), b.status.load, secs)
		}
	}
	tw.Flush()
	fmt.Fprintf(out, "%d benches, %d failed; %d figures, %d with a goal, %d of them met\n", len(benches), len(failed), figures, goals, met)
	for _, b := range benches {
		if b.status.exit == 0 && len(b.figures) > 0 && len(b.bad) == 0 {
			continue
		}
		fmt.Fprintf(out, "\n%s: the last lines it printed:\n", b.name)
		for _, l := range b.tail {
			fmt.Fprintf(out, "  %s\n", l)
		}
	}
	return failed
}

func num(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// lines is a file's lines that are not empty; a file that is not there
// has none.
func lines(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out, nil
}
