// Package strictjson reads the body's JSON documents (config files, board
// profiles) strictly and checks them against a JSON Schema (draft 2020-12).
//
// Decode refuses what encoding/json lets through: duplicate keys, trailing
// data, nesting deeper than MaxDepth. Validation errors name the file, the
// line and column, the JSON path ($.mqtt.keepalive_s) and what was
// expected. They never repeat a string value from the document, because a
// secret typed into the wrong field must not reach a terminal or a log;
// numbers are repeated only where the schema does not mark the field
// "x-sensitive": true.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"weak"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// MaxDepth bounds the nesting of a document.
const MaxDepth = 32

// MaxSize bounds the size of a document.
const MaxSize = 1 << 20

// Error is one problem with a document.
type Error struct {
	File   string
	Line   int // 1-based; 0 when unknown
	Col    int
	Path   string // $.a.b[2]
	Reason string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", e.Line, e.Col)
	}
	if e.Path != "" {
		b.WriteString(": ")
		b.WriteString(e.Path)
	}
	b.WriteString(": ")
	b.WriteString(e.Reason)
	return b.String()
}

// Errors is every problem found in one document, in document order.
type Errors []*Error

func (es Errors) Error() string {
	s := make([]string, len(es))
	for i, e := range es {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n")
}

// Doc is a decoded document: the value (objects as map[string]any, numbers
// as json.Number) and its source, to say where a path is.
type Doc struct {
	File  string
	Value any
	src   []byte
}

// At returns the line and column where the value at ptr (a JSON pointer)
// starts, or 0, 0 when there is no such value. It scans the source again:
// positions are needed only for the few paths an error names, so none are
// kept for the many that are fine.
func (d *Doc) At(ptr string) (line, col int) {
	if d.src == nil {
		return 0, 0
	}
	var target []string
	if ptr != "" {
		for _, t := range strings.Split(ptr[1:], "/") {
			target = append(target, unescapePointer(t))
		}
	}
	dec := json.NewDecoder(bytes.NewReader(d.src))
	p := parser{dec: dec, src: d.src, target: target, found: -1}
	p.value(0)
	if p.found < 0 {
		return 0, 0
	}
	return lineCol(d.src, p.found)
}

func lineCol(src []byte, off int) (int, int) {
	off = min(off, len(src))
	line := 1 + bytes.Count(src[:off], []byte{'\n'})
	col := off - bytes.LastIndexByte(src[:off], '\n')
	return line, col
}

// Decode parses data strictly. The error is an Errors naming file.
func Decode(file string, data []byte) (*Doc, error) {
	if len(data) > MaxSize {
		return nil, Errors{{File: file, Reason: fmt.Sprintf("document is %d bytes, more than the %d allowed", len(data), MaxSize)}}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	p := parser{dec: dec, src: data, build: true, found: -1}
	v, err := p.value(0)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			err = p.fail("unexpected data after the document")
		}
	}
	if err != nil {
		var pe *parseError
		if errors.As(err, &pe) {
			line, col := lineCol(data, pe.off)
			return nil, Errors{{File: file, Line: line, Col: col, Path: tokensToPath(pe.path), Reason: pe.msg}}
		}
		return nil, Errors{{File: file, Reason: err.Error()}}
	}
	return &Doc{File: file, Value: v, src: data}, nil
}

type parseError struct {
	path []string
	msg  string
	off  int
}

func (e *parseError) Error() string { return e.msg }

// parser walks a document's tokens keeping the path to the current value
// as a stack. With build set it builds the value and refuses duplicate
// keys; with a target it records where that path's value starts.
type parser struct {
	dec    *json.Decoder
	src    []byte
	path   []string
	build  bool
	target []string
	found  int // offset of target's value, -1 until seen
}

func (p *parser) fail(msg string) error {
	return &parseError{path: slices.Clone(p.path), msg: msg, off: int(p.dec.InputOffset())}
}

func (p *parser) token() (json.Token, error) {
	t, err := p.dec.Token()
	if err == io.EOF {
		return nil, p.fail("the document ends early")
	}
	if err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, &parseError{path: slices.Clone(p.path), msg: "not valid JSON: " + se.Error(), off: int(se.Offset)}
		}
		return nil, p.fail("not valid JSON: " + err.Error())
	}
	return t, nil
}

// errFound ends a search once the target was seen.
var errFound = errors.New("found")

func (p *parser) value(depth int) (any, error) {
	if depth > MaxDepth {
		return nil, p.fail(fmt.Sprintf("nested deeper than %d levels", MaxDepth))
	}
	start := int(p.dec.InputOffset())
	t, err := p.token()
	if err != nil {
		return nil, err
	}
	if p.target != nil || !p.build {
		if slices.Equal(p.path, p.target) {
			p.found = skipSpace(p.src, start)
			return nil, errFound
		}
	}
	d, ok := t.(json.Delim)
	if !ok {
		return t, nil
	}
	switch d {
	case '{':
		var m map[string]any
		if p.build {
			m = map[string]any{}
		}
		for p.dec.More() {
			kt, err := p.token()
			if err != nil {
				return nil, err
			}
			k := kt.(string)
			p.path = append(p.path, k)
			if p.build {
				if _, dup := m[k]; dup {
					return nil, p.fail(fmt.Sprintf("key %q appears twice", k))
				}
			}
			v, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			p.path = p.path[:len(p.path)-1]
			if p.build {
				m[k] = v
			}
		}
		if _, err := p.token(); err != nil {
			return nil, err
		}
		return m, nil
	case '[':
		var a []any
		if p.build {
			a = []any{}
		}
		for i := 0; p.dec.More(); i++ {
			p.path = append(p.path, strconv.Itoa(i))
			v, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			p.path = p.path[:len(p.path)-1]
			if p.build {
				a = append(a, v)
			}
		}
		if _, err := p.token(); err != nil {
			return nil, err
		}
		return a, nil
	}
	return t, nil
}

// skipSpace moves off past separators to where the value starts.
func skipSpace(src []byte, off int) int {
	for off < len(src) {
		switch src[off] {
		case ' ', '\t', '\n', '\r', ':', ',':
			off++
		default:
			return off
		}
	}
	return off
}

func escapePointer(k string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(k)
}

func unescapePointer(k string) string {
	return strings.NewReplacer("~1", "/", "~0", "~").Replace(k)
}

func tokensToPath(tokens []string) string {
	var b strings.Builder
	b.WriteString("$")
	for _, t := range tokens {
		if t == "*" {
			b.WriteString(".*")
		} else if _, err := strconv.Atoi(t); err == nil {
			b.WriteString("[" + t + "]")
		} else if isIdent(t) {
			b.WriteString("." + t)
		} else {
			b.WriteString("[" + strconv.Quote(t) + "]")
		}
	}
	return b.String()
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

func tokensToPointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteString("/" + escapePointer(t))
	}
	return b.String()
}

// ReadFile reads a document from a regular file of at most MaxSize bytes.
// It opens without blocking and checks what it opened, so a FIFO, a device
// or a symlink to one is refused, not read, even if it was swapped in after
// a look at the path.
func ReadFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file (%s)", path, fi.Mode().Type())
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > MaxSize {
		return nil, fmt.Errorf("%s: more than the %d bytes allowed", path, MaxSize)
	}
	return data, nil
}

// Schema is a compiled JSON Schema with the paths it marks sensitive.
type Schema struct {
	sch       *jsonschema.Schema
	doc       map[string]any
	sensitive [][]string // paths; "*" matches any key or index
}

// Compile compiles a schema document. url names it in errors.
func Compile(url string, schema []byte) (*Schema, error) {
	d, err := Decode(url, schema)
	if err != nil {
		return nil, err
	}
	m, ok := d.Value.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("strictjson: schema %s is not an object", url)
	}
	// The compiler wants numbers as json.Number or float64; give it a copy
	// read by its own reader.
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, fmt.Errorf("strictjson: schema %s: %w", url, err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource(url, v); err != nil {
		return nil, fmt.Errorf("strictjson: schema %s: %w", url, err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("strictjson: schema %s: %w", url, err)
	}
	s := &Schema{sch: sch, doc: m}
	s.collectSensitive(m, m, nil, 0)
	return s, nil
}

// Lazy returns a function that gives the schema compiled from an embedded
// document: compiled when first asked for, and again when asked after the
// last one given out was collected. A compiled schema is many times its
// document's size and a body reads its config and board profiles at
// start, so none is kept for the rest of the run; callers close together
// (the layers of one config, the profiles of one set) share one. The
// document is the program's own: one that does not compile panics.
func Lazy(url string, schema []byte) func() *Schema {
	var mu sync.Mutex
	var last weak.Pointer[Schema]
	return func() *Schema {
		mu.Lock()
		defer mu.Unlock()
		if s := last.Value(); s != nil {
			return s
		}
		s, err := Compile(url, schema)
		if err != nil {
			panic(err)
		}
		last = weak.Make(s)
		return s
	}
}

// Doc returns the schema document, for tools that describe it.
func (s *Schema) Doc() map[string]any { return s.doc }

// collectSensitive walks properties, items, additionalProperties and local
// $refs for "x-sensitive": true.
func (s *Schema) collectSensitive(root, node map[string]any, path []string, depth int) {
	if depth > MaxDepth {
		return
	}
	if ref, ok := node["$ref"].(string); ok && strings.HasPrefix(ref, "#/") {
		if target := resolve(root, ref[2:]); target != nil {
			s.collectSensitive(root, target, path, depth+1)
		}
	}
	if b, _ := node["x-sensitive"].(bool); b {
		s.sensitive = append(s.sensitive, append([]string(nil), path...))
	}
	if props, ok := node["properties"].(map[string]any); ok {
		for k, v := range props {
			if m, ok := v.(map[string]any); ok {
				s.collectSensitive(root, m, append(path, k), depth+1)
			}
		}
	}
	for _, key := range []string{"items", "additionalProperties"} {
		if m, ok := node[key].(map[string]any); ok {
			s.collectSensitive(root, m, append(path, "*"), depth+1)
		}
	}
}

func resolve(root map[string]any, ptr string) map[string]any {
	var cur any = root
	for _, t := range strings.Split(ptr, "/") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[unescapePointer(t)]
	}
	m, _ := cur.(map[string]any)
	return m
}

// Sensitive tells whether the value at path (object keys and array
// indexes) or any value inside it is marked "x-sensitive".
func (s *Schema) Sensitive(path []string) bool {
	for _, sp := range s.sensitive {
		if len(sp) > len(path) {
			continue
		}
		match := true
		for i, t := range sp {
			if t != "*" && t != path[i] {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

// SensitivePaths lists the marked paths as $.a.b, "*" for any key.
func (s *Schema) SensitivePaths() []string {
	var out []string
	for _, p := range s.sensitive {
		out = append(out, tokensToPath(p))
	}
	sort.Strings(out)
	return out
}

// Validate checks d against the schema. The error is an Errors with one
// entry per failing leaf, in document order.
func (s *Schema) Validate(d *Doc) error {
	err := s.sch.Validate(d.Value)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return Errors{{File: d.File, Reason: err.Error()}}
	}
	var out Errors
	seen := map[string]bool{}
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		add := func(loc []string, reason string) {
			ptr := tokensToPointer(loc)
			key := ptr + "\x00" + reason
			if seen[key] {
				return
			}
			seen[key] = true
			line, col := d.At(ptr)
			out = append(out, &Error{File: d.File, Line: line, Col: col, Path: tokensToPath(loc), Reason: reason})
		}
		if k, ok := e.ErrorKind.(*kind.AdditionalProperties); ok {
			// One error per unknown key, pointing at it.
			for _, p := range k.Properties {
				loc := append(append([]string(nil), e.InstanceLocation...), p)
				add(loc, fmt.Sprintf("unknown key %q", p))
			}
			return
		}
		add(e.InstanceLocation, s.reason(e))
	}
	walk(ve)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Line != out[j].Line {
			return out[i].Line < out[j].Line
		}
		return out[i].Col < out[j].Col
	})
	return out
}

// Into decodes a validated document into v, refusing fields v does not
// have (a schema and its Go type that disagree are a bug worth hearing of).
func Into(d *Doc, v any) error {
	data, err := json.Marshal(d.Value)
	if err != nil {
		return fmt.Errorf("strictjson: %s: %w", d.File, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("strictjson: %s: %w", d.File, err)
	}
	return nil
}
