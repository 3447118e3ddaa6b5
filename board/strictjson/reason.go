package strictjson

import (
	"fmt"
	"math/big"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// reason says what was expected at a failing leaf without repeating string
// values, and without numbers under a sensitive path.
func (s *Schema) reason(e *jsonschema.ValidationError) string {
	secret := s.Sensitive(e.InstanceLocation)
	num := func(r *big.Rat) string {
		if secret {
			return "the value"
		}
		return ratString(r)
	}
	switch k := e.ErrorKind.(type) {
	case *kind.AdditionalProperties:
		quoted := make([]string, len(k.Properties))
		for i, p := range k.Properties {
			quoted[i] = fmt.Sprintf("%q", p)
		}
		if len(quoted) == 1 {
			return fmt.Sprintf("unknown key %s", quoted[0])
		}
		return fmt.Sprintf("unknown keys %s", strings.Join(quoted, ", "))
	case *kind.Required:
		return fmt.Sprintf("missing required key %s", quoteAll(k.Missing))
	case *kind.Type:
		return fmt.Sprintf("wrong type: got %s, want %s", k.Got, strings.Join(k.Want, " or "))
	case *kind.Minimum:
		return fmt.Sprintf("out of range: %s is less than the minimum %s", num(k.Got), ratString(k.Want))
	case *kind.Maximum:
		return fmt.Sprintf("out of range: %s is more than the maximum %s", num(k.Got), ratString(k.Want))
	case *kind.ExclusiveMinimum:
		return fmt.Sprintf("out of range: %s must be more than %s", num(k.Got), ratString(k.Want))
	case *kind.ExclusiveMaximum:
		return fmt.Sprintf("out of range: %s must be less than %s", num(k.Got), ratString(k.Want))
	case *kind.MultipleOf:
		return fmt.Sprintf("must be a multiple of %s", ratString(k.Want))
	case *kind.MinLength:
		return fmt.Sprintf("too short: %d characters, want at least %d", k.Got, k.Want)
	case *kind.MaxLength:
		return fmt.Sprintf("too long: %d characters, want at most %d", k.Got, k.Want)
	case *kind.Pattern:
		return fmt.Sprintf("does not match the pattern %s", k.Want)
	case *kind.Format:
		return fmt.Sprintf("not a valid %s", k.Want)
	case *kind.Enum:
		return fmt.Sprintf("not one of the allowed values %s", display(k.Want))
	case *kind.Const:
		return fmt.Sprintf("must be %s", display([]any{k.Want}))
	case *kind.MinItems:
		return fmt.Sprintf("%d items, want at least %d", k.Got, k.Want)
	case *kind.MaxItems:
		return fmt.Sprintf("%d items, want at most %d", k.Got, k.Want)
	case *kind.UniqueItems:
		return fmt.Sprintf("items %d and %d are the same; each must be unique", k.Duplicates[0], k.Duplicates[1])
	case *kind.MinProperties:
		return fmt.Sprintf("%d keys, want at least %d", k.Got, k.Want)
	case *kind.MaxProperties:
		return fmt.Sprintf("%d keys, want at most %d", k.Got, k.Want)
	case *kind.FalseSchema:
		return "not allowed here"
	case *kind.DependentRequired:
		return fmt.Sprintf("%q needs %s", k.Prop, quoteAll(k.Missing))
	}
	// A kind without its own sentence: name the keyword that failed, not
	// the library's message, which may quote the value.
	return fmt.Sprintf("fails the schema's %q rule", strings.Join(e.ErrorKind.KeywordPath(), "/"))
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

func ratString(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return fmt.Sprintf("%g", f)
}

// display lists schema constants (from the schema, never the document).
func display(vs []any) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		switch v := v.(type) {
		case string:
			s[i] = fmt.Sprintf("%q", v)
		default:
			s[i] = fmt.Sprint(v)
		}
	}
	return strings.Join(s, ", ")
}
