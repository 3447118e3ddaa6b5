package strictjson

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"weak"
)

const testSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "additionalProperties": false,
  "required": ["version"],
  "properties": {
    "version": {"const": 1},
    "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 8},
    "port": {"type": "integer", "minimum": 1, "maximum": 65535},
    "mode": {"enum": ["a", "b"]},
    "secret": {"type": "object", "additionalProperties": false, "properties": {
      "pin": {"type": "integer", "maximum": 9999, "x-sensitive": true},
      "token": {"type": "string", "minLength": 8, "x-sensitive": true}
    }},
    "list": {"type": "array", "items": {"$ref": "#/$defs/item"}}
  },
  "$defs": {"item": {"type": "object", "properties": {"key": {"type": "string", "x-sensitive": true}}}}
}`

func compile(t *testing.T) *Schema {
	t.Helper()
	s, err := Compile("test.schema.json", []byte(testSchema))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestLazy: callers close together share one compiled schema; once the
// last holder lets go it is collected, and the next caller compiles it
// again; a document that does not compile panics.
func TestLazy(t *testing.T) {
	schema := Lazy("test.schema.json", []byte(testSchema))
	a := schema()
	if b := schema(); b != a {
		t.Fatal("a schema still held was compiled again")
	}
	if err := check(a, `{"version": 1, "name": "x"}`); err != nil {
		t.Fatal(err)
	}
	held := weak.Make(a)
	a = nil
	runtime.GC()
	if held.Value() != nil {
		t.Fatal("the schema was kept after its last holder let go")
	}
	if err := check(schema(), `{"version": 1, "name": 2}`); err == nil {
		t.Fatal("the schema compiled again checks nothing")
	}
	defer func() {
		if recover() == nil {
			t.Error("a schema that does not compile did not panic")
		}
	}()
	Lazy("bad.schema.json", []byte(`{"type": 3}`))()
}

func check(s *Schema, doc string) error {
	d, err := Decode("c.json", []byte(doc))
	if err != nil {
		return err
	}
	return s.Validate(d)
}

func TestCheck(t *testing.T) {
	s := compile(t)
	for _, tc := range []struct {
		name, doc string
		want      string // "" means valid
		never     string // must not appear in the error
	}{
		{"valid", `{"version": 1, "name": "abc", "port": 80}`, "", ""},
		{"unknown key", `{"version": 1,
  "nmae": "hunter2hunter2"}`, `c.json:2:11: $.nmae: unknown key "nmae"`, "hunter2"},
		{"wrong type", `{"version": 1, "port": "80"}`, `$.port: wrong type: got string, want integer`, ""},
		{"out of range", `{"version": 1, "port": 70000}`, `$.port: out of range: 70000 is more than the maximum 65535`, ""},
		{"pattern hides value", `{"version": 1, "name": "S3CRET"}`, `$.name: does not match the pattern ^[a-z]+$`, "S3CRET"},
		{"enum", `{"version": 1, "mode": "zzz-secret"}`, `$.mode: not one of the allowed values "a", "b"`, "zzz-secret"},
		{"const", `{"version": 2}`, `$.version: must be 1`, ""},
		{"missing", `{}`, `$: missing required key "version"`, ""},
		{"sensitive number hidden", `{"version": 1, "secret": {"pin": 123456}}`, `$.secret.pin: out of range: the value is more than the maximum 9999`, "123456"},
		{"sensitive short", `{"version": 1, "secret": {"token": "abc"}}`, `$.secret.token: too short: 3 characters, want at least 8`, "abc\""},
		{"duplicate key", `{"version": 1, "port": 1, "port": 2}`, `$.port: key "port" appears twice`, ""},
		{"trailing data", `{"version": 1} {}`, `unexpected data after the document`, ""},
		{"syntax", `{"version": 1,}`, `not valid JSON`, ""},
		{"truncated", `{"version": 1, "name": `, `the document ends early`, ""},
		{"too deep", strings.Repeat("[", 40) + strings.Repeat("]", 40), `nested deeper than 32 levels`, ""},
		{"not an object", `[]`, `$: wrong type: got array, want object`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := check(s, tc.doc)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("got %v, want valid", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("got valid, want %q", tc.want)
			}
			var es Errors
			if !errors.As(err, &es) {
				t.Fatalf("got %T, want Errors", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %q, want it to contain %q", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "c.json") {
				t.Errorf("got %q, want it to name the file", err)
			}
			if tc.never != "" && strings.Contains(err.Error(), tc.never) {
				t.Errorf("error %q repeats the value %q", err, tc.never)
			}
		})
	}
}

func TestErrorsAreInDocumentOrder(t *testing.T) {
	s := compile(t)
	err := check(s, `{
  "version": 1,
  "port": 0,
  "name": 5
}`)
	var es Errors
	if !errors.As(err, &es) || len(es) != 2 {
		t.Fatalf("got %v, want two errors", err)
	}
	if es[0].Line != 3 || es[1].Line != 4 {
		t.Errorf("lines %d, %d; want 3, 4", es[0].Line, es[1].Line)
	}
}

func TestSensitivePaths(t *testing.T) {
	s := compile(t)
	for _, tc := range []struct {
		path []string
		want bool
	}{
		{[]string{"secret", "pin"}, true},
		{[]string{"secret", "token"}, true},
		{[]string{"secret"}, false},
		{[]string{"list", "3", "key"}, true},
		{[]string{"name"}, false},
	} {
		if got := s.Sensitive(tc.path); got != tc.want {
			t.Errorf("Sensitive(%v) = %v, want %v", tc.path, got, tc.want)
		}
	}
	if got, want := strings.Join(s.SensitivePaths(), " "), "$.list.*.key $.secret.pin $.secret.token"; got != want {
		t.Errorf("SensitivePaths %q, want %q", got, want)
	}
}

func FuzzDecode(f *testing.F) {
	for _, seed := range []string{`{"version": 1}`, `{"a": [1, 2, {"b": null}]}`, `{"a":1,"a":2}`, `[[[[`, `"\ud800"`, "{\"\x00\": 1}", `1e999`} {
		f.Add([]byte(seed))
	}
	s, err := Compile("test.schema.json", []byte(testSchema))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Decode("f.json", data)
		if err != nil {
			var es Errors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("error %T %v is not Errors", err, err)
			}
			return
		}
		if err := s.Validate(d); err != nil {
			var es Errors
			if !errors.As(err, &es) {
				t.Fatalf("validation error %T is not Errors", err)
			}
		}
	})
}

func TestDecodeMemoryIsBounded(t *testing.T) {
	// A long key over a long array once cost a pointer string per element.
	doc := `{"` + strings.Repeat("k", 100_000) + `": [` + strings.Repeat("0,", 20_000) + `0]}`
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	d, err := Decode("big.json", []byte(doc))
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 32<<20 {
		t.Errorf("decoding %d bytes allocated %d MiB", len(doc), got>>20)
	}
	if line, col := d.At("/" + strings.Repeat("k", 100_000) + "/19999"); line != 1 || col < 100_000 {
		t.Errorf("At: %d:%d", line, col)
	}
}

func TestReadFileRefusesSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "ok.json")
	os.WriteFile(good, []byte(`{}`), 0o600)
	if b, err := ReadFile(good); err != nil || string(b) != "{}" {
		t.Errorf("regular file: %q %v", b, err)
	}
	link := filepath.Join(dir, "mem.json")
	os.Symlink("/dev/null", link)
	fifo := filepath.Join(dir, "fifo.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.json")
	os.WriteFile(big, make([]byte, MaxSize+1), 0o600)
	for name, p := range map[string]string{"symlink to a device": link, "fifo": fifo, "directory": dir} {
		if _, err := ReadFile(p); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := ReadFile(big); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("big file: %v", err)
	}
}
