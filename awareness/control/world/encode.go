package world

import (
	"slices"
	"strings"

	"github.com/tobe-body/tobe-body/ledger"
)

// The model's payloads are written as ledger.MarshalPayload writes them
// (FuzzPayloadsAsTheLibraryWrites holds them to it), without reflection:
// a change's payload is most of what deriving it costs. Each map's
// fields go in the order of their keys' encodings (shorter keys first,
// then bytewise), a field with omitempty only when it is not empty, and
// a nil slice without omitempty as null.

// fieldsOf is a map being written: its head is patched when it is done
// (every map here has fewer than 24 fields: one byte).
type fieldsOf struct {
	b    []byte
	head int
	n    byte
}

func openMap(b []byte) fieldsOf { return fieldsOf{b: append(b, 0), head: len(b)} }

// key appends the next field's key.
func (f *fieldsOf) key(k string) []byte {
	f.n++
	f.b = ledger.AppendText(f.b, k)
	return f.b
}

func (f *fieldsOf) text(k, v string)          { f.b = ledger.AppendText(f.key(k), v) }
func (f *fieldsOf) int(k string, v int64)     { f.b = ledger.AppendInt(f.key(k), v) }
func (f *fieldsOf) uint(k string, v uint64)   { f.b = ledger.AppendUint(f.key(k), v) }
func (f *fieldsOf) float(k string, v float64) { f.b = ledger.AppendFloat(f.key(k), v) }

// The fields with omitempty, written when they are not empty.

func (f *fieldsOf) textIf(k, v string) {
	if v != "" {
		f.text(k, v)
	}
}

func (f *fieldsOf) intIf(k string, v int64) {
	if v != 0 {
		f.int(k, v)
	}
}

func (f *fieldsOf) uintIf(k string, v uint64) {
	if v != 0 {
		f.uint(k, v)
	}
}

func (f *fieldsOf) trueIf(k string, v bool) {
	if v {
		f.b = ledger.AppendBool(f.key(k), true)
	}
}

func (f *fieldsOf) done() []byte {
	f.b[f.head] = 0xa0 | f.n // a map of n pairs
	return f.b
}

// appendChanged appends a world.changed's payload.
func appendChanged(b []byte, c *Changed) []byte {
	f := openMap(b)
	f.int("at", c.At)
	f.textIf("was", c.Was)
	f.text("kind", string(c.Kind))
	if len(c.Ended) > 0 {
		f.b = appendEnds(f.key("ended"), c.Ended)
	}
	f.int("since", c.Since)
	f.text("value", c.Value)
	f.text("entity", c.Entity)
	if len(c.Records) > 0 {
		f.b = appendRecords(f.key("records"), c.Records)
	}
	if len(c.Sources) > 0 {
		f.b = ledger.AppendArrayHead(f.key("sources"), len(c.Sources))
		for _, s := range c.Sources {
			f.b = ledger.AppendText(f.b, s)
		}
	}
	f.trueIf("conflict", c.Conflict)
	f.trueIf("observed", c.Observed)
	if len(c.Readings) > 0 {
		f.b = appendReadings(f.key("readings"), c.Readings)
	}
	f.float("confidence", c.Confidence)
	f.text("provenance", c.Provenance)
	f.int("since_run_ms", c.SinceRunMS)
	return f.done()
}

// appendStep appends a world.observed's payload.
func appendStep(b []byte, s *Step) []byte {
	f := openMap(b)
	if len(s.Ended) > 0 {
		f.b = appendEnds(f.key("ended"), s.Ended)
	}
	f.text("entity", s.Entity)
	if len(s.Records) > 0 {
		f.b = appendRecords(f.key("records"), s.Records)
	}
	return f.done()
}

// appendMarks appends a world.seen's payload.
func appendMarks(b []byte, m *Marks) []byte {
	f := openMap(b)
	f.key("seen")
	if m.Seen == nil {
		f.b = ledger.AppendNull(f.b)
		return f.done()
	}
	f.b = ledger.AppendArrayHead(f.b, len(m.Seen))
	for i := range m.Seen {
		s := &m.Seen[i]
		g := openMap(f.b)
		g.int("at", s.At)
		g.int("run_ms", s.RunMS)
		g.text("channel", s.Channel)
		g.b = appendEvidence(g.key("evidence"), &s.Evidence)
		f.b = g.done()
	}
	return f.done()
}

func appendRecords(b []byte, rs []Record) []byte {
	b = ledger.AppendArrayHead(b, len(rs))
	for i := range rs {
		r := &rs[i]
		f := openMap(b)
		f.textIf("by", r.By)
		f.textIf("value", r.Value)
		f.text("entity", r.Entity)
		f.int("run_ms", r.RunMS)
		f.text("source", r.Source)
		f.textIf("channel", r.Channel)
		f.key("evidence")
		if r.Evidence == nil {
			f.b = ledger.AppendNull(f.b)
		} else {
			f.b = ledger.AppendArrayHead(f.b, len(r.Evidence))
			for j := range r.Evidence {
				f.b = appendEvidence(f.b, &r.Evidence[j])
			}
		}
		if len(r.Readings) > 0 {
			f.b = appendReadings(f.key("readings"), r.Readings)
		}
		f.trueIf("unsynced", r.Unsynced)
		f.intIf("expire_ms", r.ExpireMS)
		f.float("confidence", r.Confidence)
		f.text("provenance", r.Provenance)
		f.uintIf("supersedes", r.Supersedes)
		f.int("valid_from", r.ValidFrom)
		f.uintIf("uncertainty_ms", uint64(r.UncertaintyMS))
		b = f.done()
	}
	return b
}

func appendEnds(b []byte, es []Ended) []byte {
	b = ledger.AppendArrayHead(b, len(es))
	for i := range es {
		e := &es[i]
		f := openMap(b)
		f.int("at", e.At)
		f.text("entity", e.Entity)
		f.text("reason", e.Reason)
		f.uint("record", e.Record)
		f.text("source", e.Source)
		if e.Evidence != nil {
			f.b = appendEvidence(f.key("evidence"), e.Evidence)
		}
		f.intIf("last_seen", e.LastSeen)
		b = f.done()
	}
	return b
}

func appendEvidence(b []byte, e *Evidence) []byte {
	f := openMap(b)
	f.text("id", e.ID)
	f.uint("seq", e.Seq)
	f.text("type", e.Type)
	return f.done()
}

// appendReadings appends readings, a map whose keys go in the order of
// their encodings.
func appendReadings(b []byte, rs map[string]Reading) []byte {
	var small [4]string
	keys := small[:0]
	for k := range rs {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(x, y string) int {
		if len(x) != len(y) {
			return len(x) - len(y)
		}
		return strings.Compare(x, y)
	})
	b = ledger.AppendMapHead(b, len(keys))
	for _, k := range keys {
		r := rs[k]
		f := openMap(ledger.AppendText(b, k))
		f.text("unit", r.Unit)
		f.float("value", r.Value)
		f.float("uncertainty", r.Uncertainty)
		b = f.done()
	}
	return b
}
