// Package figure is the benchmarks' machine-readable figure line, read
// and printed in Go (scripts/bench/lib.sh prints the same line from the
// shell):
//
//	figure: name=NAME value=V unit=U peer=P ratio=R goal=G vs=WHO
//
// NAME is dotted words; V a number; U a unit in one word; P the peer's
// value in the same unit, or - where there is no peer; R is V ÷ P, or -;
// G the goal (value<=N, value>=N, ratio<=N, ratio>=N) or -; WHO names
// the peer in one word, or -. Every field is present, in that order.
package figure

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Prefix starts every figure line.
const Prefix = "figure:"

// Figure is one figure a bench printed.
type Figure struct {
	Name  string
	Value float64
	Unit  string
	// Peer is the peer's value, NaN where there is none; Ratio is
	// Value ÷ Peer, NaN without a peer.
	Peer, Ratio float64
	Goal        Goal
	// Vs names the peer ("" where there is none).
	Vs string
}

// Goal is what a figure is held to: its value or its ratio, at most or
// at least N. The zero Goal is no goal.
type Goal struct {
	Of string // "value" or "ratio"; "" for none
	Op string // "<=" or ">="
	N  float64
}

// Met says whether f meets its goal; ok is false where f has no goal or
// its goal is of a ratio f does not have.
func (f Figure) Met() (met, ok bool) {
	var v float64
	switch f.Goal.Of {
	case "value":
		v = f.Value
	case "ratio":
		v = f.Ratio
	default:
		return false, false
	}
	if math.IsNaN(v) {
		return false, false
	}
	if f.Goal.Op == "<=" {
		return v <= f.Goal.N, true
	}
	return v >= f.Goal.N, true
}

func (g Goal) String() string {
	if g.Of == "" {
		return "-"
	}
	return g.Of + g.Op + strconv.FormatFloat(g.N, 'g', -1, 64)
}

// ParseGoal reads a goal: value<=N, value>=N, ratio<=N, ratio>=N or -.
func ParseGoal(s string) (Goal, error) {
	if s == "-" {
		return Goal{}, nil
	}
	for _, of := range []string{"value", "ratio"} {
		rest, found := strings.CutPrefix(s, of)
		if !found {
			continue
		}
		for _, op := range []string{"<=", ">="} {
			num, found := strings.CutPrefix(rest, op)
			if !found {
				continue
			}
			n, err := number(num)
			if err != nil || math.IsNaN(n) {
				return Goal{}, fmt.Errorf("goal %q: %q is not a number", s, num)
			}
			return Goal{Of: of, Op: op, N: n}, nil
		}
		return Goal{}, fmt.Errorf("goal %q: %s must be followed by <= or >=", s, of)
	}
	return Goal{}, fmt.Errorf("goal %q: value<=N, value>=N, ratio<=N, ratio>=N or -", s)
}

// fields are a figure line's keys, in their order.
var fields = [...]string{"name", "value", "unit", "peer", "ratio", "goal", "vs"}

// ErrNotFigure is returned by Parse for a line that is not a figure line.
var ErrNotFigure = errors.New("not a figure line")

// Parse reads a figure line. A line that does not start with Prefix is
// ErrNotFigure; one that does but is malformed is an error naming the
// field that was wrong.
func Parse(line string) (Figure, error) {
	rest, found := strings.CutPrefix(strings.TrimRight(line, "\r\n"), Prefix)
	if !found {
		return Figure{}, ErrNotFigure
	}
	words := strings.Fields(rest)
	if len(words) != len(fields) {
		return Figure{}, fmt.Errorf("figure line: %d fields, want %d (%s)", len(words), len(fields), strings.Join(fields[:], ", "))
	}
	val := make([]string, len(fields))
	for i, w := range words {
		k, v, ok := strings.Cut(w, "=")
		if !ok || k != fields[i] {
			return Figure{}, fmt.Errorf("figure line: field %d is %q, want %s=VALUE", i+1, w, fields[i])
		}
		if v == "" {
			return Figure{}, fmt.Errorf("figure line: %s is empty", k)
		}
		val[i] = v
	}
	f := Figure{Name: val[0], Unit: val[2], Peer: math.NaN(), Ratio: math.NaN()}
	if !validName(f.Name) {
		return Figure{}, fmt.Errorf("figure line: name %q: dotted words of a-z, 0-9, _ and -", f.Name)
	}
	var err error
	if f.Value, err = number(val[1]); err != nil {
		return Figure{}, fmt.Errorf("figure %s: value %q is not a number", f.Name, val[1])
	}
	for _, p := range []struct {
		into *float64
		s    string
		what string
	}{{&f.Peer, val[3], "peer"}, {&f.Ratio, val[4], "ratio"}} {
		if p.s == "-" {
			continue
		}
		if *p.into, err = number(p.s); err != nil {
			return Figure{}, fmt.Errorf("figure %s: %s %q is not a number or -", f.Name, p.what, p.s)
		}
	}
	if math.IsNaN(f.Peer) != math.IsNaN(f.Ratio) {
		return Figure{}, fmt.Errorf("figure %s: a ratio without a peer, or a peer without a ratio", f.Name)
	}
	if f.Goal, err = ParseGoal(val[5]); err != nil {
		return Figure{}, fmt.Errorf("figure %s: %w", f.Name, err)
	}
	if f.Goal.Of == "ratio" && math.IsNaN(f.Ratio) {
		return Figure{}, fmt.Errorf("figure %s: a goal of its ratio, and no peer", f.Name)
	}
	if val[6] != "-" {
		f.Vs = val[6]
	}
	return f, nil
}

// number reads a finite number; "NaN" and infinities are not numbers
// here, and neither is anything strconv would take beyond decimals.
func number(s string) (float64, error) {
	n, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(n, 0) || math.IsNaN(n) || strings.ContainsAny(s, "xXpP_") {
		return 0, errors.New("not a number")
	}
	return n, nil
}

func validName(s string) bool {
	for _, part := range strings.Split(s, ".") {
		if part == "" {
			return false
		}
		for _, r := range part {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
				return false
			}
		}
	}
	return true
}

// Print writes f as a figure line. The ratio is computed from the value
// and the peer (four significant digits), as lib.sh's figure does; f's
// Ratio is not read.
func Print(w io.Writer, f Figure) error {
	peer, ratio := "-", "-"
	if !math.IsNaN(f.Peer) {
		peer = format(f.Peer)
		if f.Peer != 0 {
			ratio = strconv.FormatFloat(f.Value/f.Peer, 'g', 4, 64)
		}
	}
	vs := f.Vs
	if vs == "" {
		vs = "-"
	}
	_, err := fmt.Fprintf(w, "%s name=%s value=%s unit=%s peer=%s ratio=%s goal=%s vs=%s\n",
		Prefix, f.Name, format(f.Value), f.Unit, peer, ratio, f.Goal, vs)
	return err
}

// format is a value as a figure line carries it: the shortest decimal
// that reads back the same.
func format(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// NoPeer is a figure's Peer where it has none.
func NoPeer() float64 { return math.NaN() }
