package act

import (
	"fmt"
	"maps"
	"slices"
	"unicode"
	"unicode/utf8"
)

// Bounds of a request to act. Submit checks them before anything else,
// so every transport inherits them: a request outside them is refused
// with invalid_request and a detail naming the field and the bound, and
// it is not recorded on its own, only counted in its principal's
// action.refusals summary. At these bounds a whole request is a few KiB,
// far below a transport's line (the admin socket reads up to 64 KiB),
// and its records (the proposal and the refusal, each with the whole
// invocation) stay small.
const (
	// MaxNameBytes bounds the capability, the target, the idempotency
	// key, the work item and the approval.
	MaxNameBytes = 128
	// MaxParams bounds how many params a request carries.
	MaxParams = 16
	// MaxParamKeyBytes bounds the name of a param.
	MaxParamKeyBytes = 64
	// MaxParamValueBytes bounds one param's value: body.notify's message
	// (1024 bytes) fits.
	MaxParamValueBytes = 1024
	// MaxParamsBytes bounds every param's name and value together: a
	// notification's message with its attention, or a handful of short
	// values.
	MaxParamsBytes = 1536
	// MaxNoteBytes bounds the free-form note.
	MaxNoteBytes = 1024
	// MaxConditionBytes bounds the precondition and the expected
	// postcondition.
	MaxConditionBytes = 256
)

// CheckInvocation says which field of inv is outside the bounds of a
// request, or returns nil. Names (the capability, the target, the
// idempotency key, the work item, the approval and the params' names) are
// UTF-8 of printable characters without spaces; the capability is also a
// capability's name (words of lower-case letters, digits, "_" and "-"
// joined by dots). Free text (the note, the params' values, the
// conditions) is UTF-8 without control characters but tab and newline,
// so nothing recorded can move a terminal's cursor when it is shown.
// The principal and the mode are the transport's and the runner's to
// check.
func CheckInvocation(inv *Invocation) error {
	if len(inv.Capability) > MaxNameBytes {
		return fmt.Errorf("capability: %d bytes, more than %d", len(inv.Capability), MaxNameBytes)
	}
	if err := checkName(inv.Capability); err != nil {
		return fmt.Errorf("capability: %w", err)
	}
	for _, f := range []struct{ name, v string }{
		{"target", inv.Target}, {"idempotency_key", inv.IdempotencyKey}, {"workitem_id", inv.WorkItemID}, {"approval", inv.Approval},
	} {
		if err := checkWord(f.v, MaxNameBytes); err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
	}
	for _, f := range []struct {
		name, v string
		max     int
	}{
		{"note", inv.Note, MaxNoteBytes}, {"precondition", inv.Precondition, MaxConditionBytes},
		{"expected_postcondition", inv.ExpectedPostcondition, MaxConditionBytes},
	} {
		if err := checkFree(f.v, f.max); err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
	}
	if len(inv.Params) > MaxParams {
		return fmt.Errorf("params: %d of them, more than %d", len(inv.Params), MaxParams)
	}
	total := 0
	// In order, so the same request is always refused for the same param.
	for _, k := range slices.Sorted(maps.Keys(inv.Params)) {
		v := inv.Params[k]
		if k == "" {
			return fmt.Errorf("params: a param without a name")
		}
		if err := checkWord(k, MaxParamKeyBytes); err != nil {
			return fmt.Errorf("params: a name: %w", err)
		}
		if err := checkFree(v, MaxParamValueBytes); err != nil {
			return fmt.Errorf("params.%s: %w", k, err)
		}
		total += len(k) + len(v)
	}
	if total > MaxParamsBytes {
		return fmt.Errorf("params: %d bytes of names and values, more than %d", total, MaxParamsBytes)
	}
	return nil
}

// checkWord checks a name: at most max bytes of UTF-8, every character
// printable and none a space.
func checkWord(s string, max int) error {
	if len(s) > max {
		return fmt.Errorf("%d bytes, more than %d", len(s), max)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("not UTF-8")
	}
	for i, c := range s {
		if !unicode.IsGraphic(c) || unicode.IsSpace(c) {
			return fmt.Errorf("character %U at byte %d: want printable characters without spaces", c, i)
		}
	}
	return nil
}

// checkFree checks free text: at most max bytes of UTF-8 without control
// characters but tab and newline.
func checkFree(s string, max int) error {
	if len(s) > max {
		return fmt.Errorf("%d bytes, more than %d", len(s), max)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("not UTF-8")
	}
	for i, c := range s {
		if unicode.IsControl(c) && c != '\t' && c != '\n' {
			return fmt.Errorf("control character %U at byte %d", c, i)
		}
	}
	return nil
}
