package awareness

import (
	"bytes"
	"encoding"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
)

// resolved is s as a client has it: its JSON read back, then resolved.
func resolved(t *testing.T, s *jsonschema.Schema) *jsonschema.Resolved {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatalf("the schema does not marshal: %v", err)
	}
	var back jsonschema.Schema
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("the schema %s does not read back: %v", b, err)
	}
	r, err := back.Resolve(nil)
	if err != nil {
		t.Fatalf("the schema %s does not resolve: %v", b, err)
	}
	return r
}

// populate sets v, of a type the table derives a schema for, to a value with
// every exported field set: numbers 1, strings "x", times a fixed time,
// a pointer to a filled value, and (unless hollow) one filled element in
// every slice and map. Hollow leaves slices and maps nil, as a Go value
// that was never given any has them.
func populate(v reflect.Value, hollow bool) {
	if v.Type() == reflect.TypeFor[time.Time]() {
		v.Set(reflect.ValueOf(time.Date(2025, 6, 18, 12, 0, 0, 0, time.UTC)))
		return
	}
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		v.SetUint(1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1.5)
	case reflect.String:
		v.SetString("x")
	case reflect.Interface:
		if v.NumMethod() == 0 {
			v.Set(reflect.ValueOf(map[string]any{"x": 1.5}))
		}
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		populate(p.Elem(), hollow)
		v.Set(p)
	case reflect.Array:
		for i := range v.Len() {
			populate(v.Index(i), hollow)
		}
	case reflect.Slice:
		if !hollow {
			v.Set(reflect.MakeSlice(v.Type(), 1, 1))
			populate(v.Index(0), hollow)
		}
	case reflect.Map:
		if !hollow {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			populate(k, hollow)
			populate(e, hollow)
			v.Set(reflect.MakeMap(v.Type()))
			v.SetMapIndex(k, e)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				populate(v.Field(i), hollow)
			}
		}
	}
}

// TestOutputsAreTheirSchemas: every operation's output, and a refusal, as
// encoding/json writes them, validate against the schemas the table
// derives for them: the zero value, one with every field and element set,
// and one with every field set but slices and maps nil. An agent's
// client that validates a result (structuredContent) against the tool's
// output schema reads each of them.
func TestOutputsAreTheirSchemas(t *testing.T) {
	type typed struct {
		name   string
		typ    reflect.Type
		schema func() *jsonschema.Schema
	}
	var types []typed
	for _, e := range emptyTable(t).Entries() {
		types = append(types, typed{e.Name + " output", e.Out, e.OutSchema})
	}
	types = append(types, typed{"Error", reflect.TypeFor[Error](), func() *jsonschema.Schema {
		s, err := SchemaFor[Error]()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}})
	for _, tc := range types {
		t.Run(tc.name, func(t *testing.T) {
			rs := resolved(t, tc.schema())
			for _, shape := range []string{"zero", "filled", "hollow"} {
				v := reflect.New(tc.typ).Elem()
				if shape != "zero" {
					populate(v, shape == "hollow")
				}
				b, err := json.Marshal(v.Interface())
				if err != nil && shape == "zero" {
					t.Logf("the zero value is no output: %v", err) // a level 0, which has no name
					continue
				} else if err != nil {
					t.Fatalf("%s: %v", shape, err)
				}
				var inst any
				if err := json.Unmarshal(b, &inst); err != nil {
					t.Fatal(err)
				}
				if err := rs.Validate(inst); err != nil {
					t.Errorf("%s %s: got %v, want it valid", shape, b, err)
				}
			}
		})
	}
}

// TestEveryMarshalerHasASchema: a type that writes its own JSON (a level
// as its name) reached from an operation's input or output has a schema
// of its own in the table (enumSchemas); inferred from its Go type, its
// schema would say what it is not.
func TestEveryMarshalerHasASchema(t *testing.T) {
	known := map[reflect.Type]bool{reflect.TypeFor[time.Time](): true} // jsonschema-go's own
	for k := range enumSchemas {
		known[k] = true
	}
	marshals := func(t reflect.Type) bool {
		for _, m := range []reflect.Type{reflect.TypeFor[json.Marshaler](), reflect.TypeFor[encoding.TextMarshaler]()} {
			if t.Implements(m) || reflect.PointerTo(t).Implements(m) {
				return true
			}
		}
		return false
	}
	seen := map[reflect.Type]bool{}
	var walk func(from string, typ reflect.Type)
	walk = func(from string, typ reflect.Type) {
		if seen[typ] {
			return
		}
		seen[typ] = true
		if marshals(typ) {
			if !known[typ] {
				t.Errorf("%s: %v writes its own JSON and has no schema in enumSchemas", from, typ)
			}
			return
		}
		switch typ.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
			walk(from, typ.Elem())
		case reflect.Struct:
			for _, f := range reflect.VisibleFields(typ) {
				if f.IsExported() && !f.Anonymous {
					walk(from+"."+f.Name, f.Type)
				}
			}
		}
	}
	for _, e := range emptyTable(t).Entries() {
		walk(e.Name+" input", e.In)
		walk(e.Name+" output", e.Out)
	}
	walk("Error", reflect.TypeFor[Error]())
}

// TestOutSchemaJSON: the JSON an operation's output schema is kept as is
// its schema's.
func TestOutSchemaJSON(t *testing.T) {
	for _, e := range emptyTable(t).Entries() {
		want, err := json.Marshal(e.OutSchema())
		if err != nil {
			t.Fatal(err)
		}
		if got := e.OutSchemaJSON(); !bytes.Equal(got, want) {
			t.Errorf("%s: got %s, want %s", e.Name, got, want)
		}
	}
}
