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
	"sort"
	"strconv"
	"strings"

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
// as json.Number) and where each path starts in the source.
type Doc struct {
	File  string
	Value any
	pos   map[string]int // JSON pointer -> byte offset
	src   []byte
}

// At returns the line and column of the value at ptr (a JSON pointer).
func (d *Doc) At(ptr string) (line, col int) {
	off, ok := d.pos[ptr]
	if !ok {
		return 0, 0
	}
	return lineCol(d.src, off)
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
	d := &Doc{File: file, pos: map[string]int{}, src: data}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	p := parser{dec: dec, doc: d}
	v, err := p.value("", 0)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			err = p.fail("", "unexpected data after the document")
		}
	}
	if err != nil {
		var pe *parseError
		if errors.As(err, &pe) {
			line, col := lineCol(data, pe.off)
			return nil, Errors{{File: file, Line: line, Col: col, Path: pointerToPath(pe.ptr), Reason: pe.msg}}
		}
		return nil, Errors{{File: file, Reason: err.Error()}}
	}
	d.Value = v
	return d, nil
}

type parseError struct {
	ptr, msg string
	off      int
}

func (e *parseError) Error() string { return e.msg }

type parser struct {
	dec *json.Decoder
	doc *Doc
}

func (p *parser) fail(ptr, msg string) error {
	return &parseError{ptr: ptr, msg: msg, off: int(p.dec.InputOffset())}
}

func (p *parser) token(ptr string) (json.Token, error) {
	t, err := p.dec.Token()
	if err == io.EOF {
		return nil, p.fail(ptr, "the document ends early")
	}
	if err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, &parseError{ptr: ptr, msg: "not valid JSON: " + se.Error(), off: int(se.Offset)}
		}
		return nil, p.fail(ptr, "not valid JSON: "+err.Error())
	}
	return t, nil
}

func (p *parser) value(ptr string, depth int) (any, error) {
	if depth > MaxDepth {
		return nil, p.fail(ptr, fmt.Sprintf("nested deeper than %d levels", MaxDepth))
	}
	start := int(p.dec.InputOffset())
	t, err := p.token(ptr)
	if err != nil {
		return nil, err
	}
	p.doc.pos[ptr] = skipSpace(p.doc.src, start)
	switch t := t.(type) {
	case json.Delim:
		switch t {
		case '{':
			m := map[string]any{}
			for p.dec.More() {
				kt, err := p.token(ptr)
				if err != nil {
					return nil, err
				}
				k := kt.(string)
				child := ptr + "/" + escapePointer(k)
				if _, dup := m[k]; dup {
					return nil, p.fail(child, fmt.Sprintf("key %q appears twice", k))
				}
				v, err := p.value(child, depth+1)
				if err != nil {
					return nil, err
				}
				m[k] = v
			}
			if _, err := p.token(ptr); err != nil {
				return nil, err
			}
			return m, nil
		case '[':
			a := []any{}
			for i := 0; p.dec.More(); i++ {
				v, err := p.value(ptr+"/"+strconv.Itoa(i), depth+1)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			if _, err := p.token(ptr); err != nil {
				return nil, err
			}
			return a, nil
		}
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

// pointerToPath turns /a/b/2 into $.a.b[2].
func pointerToPath(ptr string) string {
	if ptr == "" {
		return "$"
	}
	var tokens []string
	for _, t := range strings.Split(ptr[1:], "/") {
		tokens = append(tokens, unescapePointer(t))
	}
	return tokensToPath(tokens)
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
