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
// which is derived every time.
func calmInput(dst []byte, typ string, payload []byte) (in []byte, ok bool) {
	switch typ {
	case "audio.level":
		return dst, true
	case "camera.summary":
		err := ledger.RawFields(payload, func(k, v []byte) error {
			if string(k) == "zones" || string(k) == "moving" {
				dst = ledger.AppendField(dst, k, v)
			}
			return nil
		})
		return dst, err == nil
	}
	return dst, false
}

// stepFields is what the projection reads of a step's payload (a
// Changed or a Step), as encoded.
type stepFields struct {
	entity  string
	at      int64
	records [][]byte // each record as encoded
	ended   []Ended
	// state is the payload without its records and ends: a Changed's
	// state, as it would be encoded without them.
	state []byte
}

// readStep reads a step's payload without decoding its records: the
// projection keeps them as they were encoded.
func readStep(p []byte) (stepFields, error) {
	var st stepFields
	kept := 0
	var fields []byte // the state's fields, as encoded
	err := ledger.RawFields(p, func(k, v []byte) error {
		var err error
		switch string(k) {
		case "records":
			err = ledger.RawItems(v, func(r []byte) error {
				st.records = append(st.records, r)
				return nil
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
	st.state = append(ledger.AppendMapHead(nil, kept), fields...)
	return st, nil
}

// recordKeys reads what names a record as encoded: its entity, its
// source and its valid_from.
func recordKeys(p []byte) (entity, source string, validFrom int64, err error) {
	err = ledger.RawFields(p, func(k, v []byte) error {
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
	return entity, source, validFrom, err
}
