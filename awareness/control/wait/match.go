package wait

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Clause is one test of an event's payload field; a condition's clauses
// must all hold. Each clause is of one kind:
//
//	equals  the field is this string, number or boolean
//	in      the field is one of these
//	prefix  the field is a string that begins so
//	above / below   a numeric threshold: the field is a number greater
//	        than above, less than below (both: between)
//	zone    the event is in a zone of the camera: its zone is one of
//	        names, or its box ([x0, y0, x1, y1], normalised) overlaps box
//
// Field is a payload field by name; a dot goes into a map ("temps.cpu").
// A zone clause reads "zone" and "box" unless Field names the zone's
// field.
type Clause struct {
	Field  string   `cbor:"field,omitempty" json:"field,omitempty"`
	Equals any      `cbor:"equals,omitempty" json:"equals,omitempty"`
	In     []any    `cbor:"in,omitempty" json:"in,omitempty"`
	Prefix string   `cbor:"prefix,omitempty" json:"prefix,omitempty"`
	Above  *float64 `cbor:"above,omitempty" json:"above,omitempty"`
	Below  *float64 `cbor:"below,omitempty" json:"below,omitempty"`
	Zone   *Zone    `cbor:"zone,omitempty" json:"zone,omitempty"`
}

// Zone is a part of a camera's view: named zones, or a box.
type Zone struct {
	Names []string    `cbor:"names,omitempty" json:"names,omitempty"`
	Box   *[4]float64 `cbor:"box,omitempty" json:"box,omitempty"`
}

// Limits on a matcher.
const (
	MaxClauses = 8
	MaxIn      = 64
	maxField   = 64
)

// kind names the clause's kind, checking that it has one.
func (c *Clause) kind() (string, error) {
	var kinds []string
	if c.Equals != nil {
		kinds = append(kinds, "equals")
	}
	if c.In != nil {
		kinds = append(kinds, "in")
	}
	if c.Prefix != "" {
		kinds = append(kinds, "prefix")
	}
	if c.Above != nil || c.Below != nil {
		kinds = append(kinds, "threshold")
	}
	if c.Zone != nil {
		kinds = append(kinds, "zone")
	}
	switch len(kinds) {
	case 0:
		return "", fmt.Errorf("no test: one of equals, in, prefix, above/below, zone")
	case 1:
		return kinds[0], nil
	}
	return "", fmt.Errorf("more than one test (%s): one a clause", strings.Join(kinds, ", "))
}

// scalar checks a value a clause compares with: a string, a number or a
// boolean (as JSON gives them).
func scalar(v any) (any, error) {
	switch x := v.(type) {
	case string, bool:
		return x, nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("not a finite number")
		}
		return x, nil
	case int:
		return float64(x), nil
	case int64:
		return float64(x), nil
	case uint64:
		return float64(x), nil
	}
	return nil, fmt.Errorf("%T: a string, a number or a boolean", v)
}

// check checks a clause and puts its values in their compared form
// (numbers as float64).
func (c *Clause) check() error {
	k, err := c.kind()
	if err != nil {
		return err
	}
	if k != "zone" && c.Field == "" {
		return fmt.Errorf("%s: no field", k)
	}
	if len(c.Field) > maxField {
		return fmt.Errorf("field: %d bytes, at most %d", len(c.Field), maxField)
	}
	switch k {
	case "equals":
		if c.Equals, err = scalar(c.Equals); err != nil {
			return fmt.Errorf("equals: %v", err)
		}
	case "in":
		if len(c.In) == 0 || len(c.In) > MaxIn {
			return fmt.Errorf("in: 1 to %d values, not %d", MaxIn, len(c.In))
		}
		for i := range c.In {
			if c.In[i], err = scalar(c.In[i]); err != nil {
				return fmt.Errorf("in[%d]: %v", i, err)
			}
		}
	case "threshold":
		for _, b := range []*float64{c.Above, c.Below} {
			if b != nil && (math.IsNaN(*b) || math.IsInf(*b, 0)) {
				return fmt.Errorf("above/below: not a finite number")
			}
		}
		if c.Above != nil && c.Below != nil && *c.Above >= *c.Below {
			return fmt.Errorf("above %v and below %v: nothing is between", *c.Above, *c.Below)
		}
	case "zone":
		z := c.Zone
		if len(z.Names) == 0 && z.Box == nil {
			return fmt.Errorf("zone: names or a box")
		}
		if len(z.Names) > MaxIn {
			return fmt.Errorf("zone: at most %d names", MaxIn)
		}
		if b := z.Box; b != nil {
			for _, v := range b {
				if !(v >= 0 && v <= 1) {
					return fmt.Errorf("zone: box %v: coordinates from 0 to 1", *b)
				}
			}
			if b[0] >= b[2] || b[1] >= b[3] {
				return fmt.Errorf("zone: box %v: x0 < x1 and y0 < y1", *b)
			}
		}
	}
	return nil
}

// number reads a decoded value as a number.
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case uint64:
		return float64(x), true
	case int64:
		return float64(x), true
	}
	return 0, false
}

// Key is a decoded payload value in the form a clause's values are held
// in (check): numbers as float64, strings and booleans as they are;
// false for what no clause's value can equal. The gate's index files
// values by it.
func Key(v any) (any, bool) {
	switch x := v.(type) {
	case string, bool:
		return x, true
	}
	if n, ok := number(v); ok {
		return n, true
	}
	return nil, false
}

// same compares a decoded value with a clause's value (string, float64
// or bool).
func same(v, want any) bool {
	k, ok := Key(v)
	return ok && k == want
}

// Holds tells whether the clause holds for an event's fields.
func (c *Clause) Holds(f *Fields) bool {
	if c.Zone != nil {
		return c.Zone.holds(f, c.Field)
	}
	v, ok := f.Get(c.Field)
	if !ok {
		return false
	}
	switch {
	case c.Equals != nil:
		return same(v, c.Equals)
	case c.In != nil:
		return slices.ContainsFunc(c.In, func(w any) bool { return same(v, w) })
	case c.Prefix != "":
		s, ok := v.(string)
		return ok && strings.HasPrefix(s, c.Prefix)
	default:
		n, ok := number(v)
		return ok && (c.Above == nil || n > *c.Above) && (c.Below == nil || n < *c.Below)
	}
}

func (z *Zone) holds(f *Fields, field string) bool {
	if field == "" {
		field = "zone"
	}
	if len(z.Names) > 0 {
		if v, ok := f.Get(field); ok {
			if s, ok := v.(string); ok && slices.Contains(z.Names, s) {
				return true
			}
		}
	}
	if z.Box != nil {
		v, ok := f.Get("box")
		if !ok {
			return false
		}
		arr, ok := v.([]any)
		if !ok || len(arr) != 4 {
			return false
		}
		var b [4]float64
		for i, x := range arr {
			if b[i], ok = number(x); !ok {
				return false
			}
		}
		// Overlap, edges excluded: a box that only touches is outside.
		return b[0] < z.Box[2] && z.Box[0] < b[2] && b[1] < z.Box[3] && z.Box[1] < b[3]
	}
	return false
}
