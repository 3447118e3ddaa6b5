package world

import (
	"errors"
	"fmt"

	"github.com/tobe-body/tobe-body/ledger"
)

// calmInput is what the model reads of an event whose observations only
// hold what its sources hold when nothing changed since (see cache.calm):
// nothing of a sound level summary, the zones and the moving zones of a
// camera summary (their names and values as encoded), appended to dst.
// ok is false for any other event, and for a payload this cannot read,
// which is derived every time. The payload is one the ledger checked
// (see ledger.Deriver).
func calmInput(dst []byte, typ string, payload []byte) (in []byte, ok bool) {
	switch typ {
	case "audio.level":
		return dst, true
	case "camera.summary":
		err := ledger.CheckedFields(payload, func(k, v []byte) error {
			if string(k) == "zones" || string(k) == "moving" {
				dst = ledger.AppendField(dst, k, v)
			}
			return nil
		})
		return dst, err == nil
	}
	return dst, false
}

// summaryZones reads a camera summary's zones and moving zones as
// encoded (sense.CameraSummary's zones and moving, arrays of texts or
// null; the payload one the ledger checked): the summary is the most
// common event a camera records, and the model needs no more of it. ok
// is false when they are not what a summary holds.
func summaryZones(payload []byte) (zones, moving []string, ok bool) {
	texts := func(v []byte) ([]string, error) {
		if len(v) == 1 && v[0] == 0xf6 { // null: none
			return nil, nil
		}
		var out []string
		err := ledger.CheckedItems(v, func(it []byte) error {
			t, err := ledger.RawText(it)
			out = append(out, t)
			return err
		})
		return out, err
	}
	err := ledger.CheckedFields(payload, func(k, v []byte) error {
		var err error
		switch string(k) {
		case "zones":
			zones, err = texts(v)
		case "moving":
			moving, err = texts(v)
		}
		return err
	})
	return zones, moving, err == nil
}

// stepFields is what the projection reads of a step's payload (a
// Changed or a Step), as encoded.
type stepFields struct {
	entity  string
	at      int64
	records []stepRecord
	ended   []Ended
	// state is the payload without its records and ends: a Changed's
	// state, as it would be encoded without them.
	state []byte
}

// stepRecord is a record of a step as encoded, and what names it.
type stepRecord struct {
	raw            []byte
	entity, source string
	validFrom      int64
}

// readStep reads a step's payload without decoding its records: the
// projection keeps them as they were encoded. The payload is one the
// ledger checked (see ledger.Projection): it is not checked again.
func readStep(p []byte) (stepFields, error) {
	var st stepFields
	kept := 0
	// The state's fields, as encoded, after a byte kept for its head
	// (fewer than 24 fields: one byte).
	fields := make([]byte, 1, max(len(p), 1))
	err := ledger.CheckedFields(p, func(k, v []byte) error {
		var err error
		switch string(k) {
		case "records":
			err = ledger.CheckedItems(v, func(raw []byte) error {
				r := stepRecord{raw: raw}
				var err error
				r.entity, r.source, r.validFrom, err = recordKeys(raw)
				st.records = append(st.records, r)
				return err
			})
			return err
		case "ended":
			return ledger.UnmarshalPayload(v, &st.ended)
		case "entity":
			st.entity, err = ledger.RawText(v)
		case "at":
			st.at, err = ledger.RawInt(v)
		}
		fields = ledger.AppendField(fields, k, v)
		kept++
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		return nil
	})
	if err != nil {
		return st, err
	}
	if h := ledger.AppendMapHead(nil, kept); len(h) == 1 {
		fields[0] = h[0]
		st.state = fields
	} else {
		st.state = append(h, fields[1:]...)
	}
	return st, nil
}

// recordKeys reads what names a record as encoded (of a payload the
// ledger checked): its entity, its source and its valid_from.
func recordKeys(p []byte) (entity, source string, validFrom int64, err error) {
	err = ledger.CheckedFields(p, func(k, v []byte) error {
		var err error
		switch string(k) {
		case "entity":
			entity, err = ledger.RawText(v)
		case "source":
			source, err = ledger.RawText(v)
		case "valid_from":
			validFrom, err = ledger.RawInt(v)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		return nil
	})
	if err == nil && (entity == "" || source == "") {
		err = errors.New("it names no entity or source")
	}
	if err != nil {
		return "", "", 0, fmt.Errorf("a record: %w", err)
	}
	return entity, source, validFrom, nil
}
