package evidence

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/tobe-body/tobe-body/ledger"
)

// Kind is what a piece of evidence is.
type Kind string

// Kinds of evidence.
const (
	Snapshot Kind = "snapshot" // a still of a camera (image/jpeg)
	Clip     Kind = "clip"     // a stretch of a microphone (audio/wav)
)

// The event types of evidence; all are audit records.
const (
	TypeCaptured = "evidence.captured"
	TypeViewed   = "evidence.viewed"
	TypeExpired  = "evidence.expired"
	TypeDeleted  = "evidence.deleted"
	TypeFrozen   = "evidence.frozen"
)

// Captured is the payload of evidence.captured: what was kept, by whom,
// why, and for how long.
type Captured struct {
	ID        string `cbor:"id" json:"id"`
	Kind      Kind   `cbor:"kind" json:"kind"`
	Source    string `cbor:"source" json:"source"` // the channel it came from (camera.front)
	MediaType string `cbor:"media_type" json:"media_type"`
	SHA256    string `cbor:"sha256" json:"sha256"` // of the bytes, in lower-case hex: the file's name
	Bytes     int64  `cbor:"bytes" json:"bytes"`
	// Width and Height are a snapshot's, in pixels; DurationMS a clip's.
	Width      int   `cbor:"width,omitempty" json:"width,omitempty"`
	Height     int   `cbor:"height,omitempty" json:"height,omitempty"`
	DurationMS int64 `cbor:"duration_ms,omitempty" json:"duration_ms,omitempty"`
	// By is the subject of the principal that asked for it; Why what it
	// said; Action the runner's action and Grant the grant that let it.
	By     string `cbor:"by" json:"by"`
	Why    string `cbor:"why,omitempty" json:"why,omitempty"`
	Action string `cbor:"action_id,omitempty" json:"action_id,omitempty"`
	Grant  string `cbor:"grant,omitempty" json:"grant,omitempty"`
	// Privacy is the source's privacy class (sensitive, restricted).
	Privacy string `cbor:"privacy" json:"privacy"`
	// LifetimeMS is how long it is kept, on the ledger's running clock
	// from RunningNS, the running clock when it was kept.
	LifetimeMS int64 `cbor:"lifetime_ms" json:"lifetime_ms"`
	RunningNS  int64 `cbor:"running_ns" json:"running_ns"`
	// FrameSeq is the source's sequence of what was captured (a camera's
	// frame), when it has one.
	FrameSeq uint64 `cbor:"frame_seq,omitempty" json:"frame_seq,omitempty"`
}

// Ends is the running time at which the piece's lifetime ends.
func (c Captured) Ends() time.Duration {
	return time.Duration(c.RunningNS) + time.Duration(c.LifetimeMS)*time.Millisecond
}

// Viewed is the payload of evidence.viewed.
type Viewed struct {
	ID     string `cbor:"id" json:"id"`
	SHA256 string `cbor:"sha256" json:"sha256"`
	By     string `cbor:"by" json:"by"`
	// Via is how the bytes left: the transport (admin, agent, mqtt) or
	// an observation it was attached to.
	Via string `cbor:"via" json:"via"`
}

// Ended is the payload of evidence.expired, evidence.deleted and
// evidence.frozen.
type Ended struct {
	ID     string `cbor:"id" json:"id"`
	SHA256 string `cbor:"sha256" json:"sha256"`
	By     string `cbor:"by" json:"by"`
	Why    string `cbor:"why,omitempty" json:"why,omitempty"`
}

// Item is a piece of evidence as the store knows it now.
type Item struct {
	Captured
	// Seq is the ledger sequence of its evidence.captured; CapturedAt its
	// wall time then (unsynced: the wall clock was not synchronised).
	Seq        uint64    `cbor:"seq" json:"seq"`
	CapturedAt time.Time `cbor:"captured_at" json:"captured_at"`
	Unsynced   bool      `cbor:"unsynced,omitempty" json:"clock_unsynced,omitempty"`
	// Frozen: its grant was revoked and it is kept for a local
	// administrator only.
	Frozen bool `cbor:"frozen,omitempty" json:"frozen,omitempty"`
	// Views counts its evidence.viewed records.
	Views uint64 `cbor:"views,omitempty" json:"views,omitempty"`
}

// ProjectionName is the ledger projection of the evidence kept now.
const ProjectionName = "evidence"

// Projections is the projection the store restores from; every opener
// of the body's ledger registers it.
func Projections() []ledger.Projection { return []ledger.Projection{projection{}} }

// projection keeps the evidence kept now, under three kinds of key:
//
//	'i' id                  → the Item (CBOR)
//	'x' ends (8 bytes) id   → nothing: the expiry order
//	'h' sha256 (hex) 0 id   → nothing: the records that name a file
//
// Ends is the running time in nanoseconds, big-endian, so the first 'x'
// key is the next piece to expire.
type projection struct{}

func (projection) Name() string    { return ProjectionName }
func (projection) Types() []string { return []string{"evidence."} }

func itemKey(id string) []byte { return append([]byte{'i'}, id...) }

func expiryKey(ends time.Duration, id string) []byte {
	k := make([]byte, 9, 9+len(id))
	k[0] = 'x'
	binary.BigEndian.PutUint64(k[1:], uint64(max(ends, 0)))
	return append(k, id...)
}

func hashKey(sha, id string) []byte {
	k := make([]byte, 0, 2+len(sha)+len(id))
	k = append(append(append(k, 'h'), sha...), 0)
	return append(k, id...)
}

func (projection) Apply(kv ledger.KV, e *ledger.Event) error {
	switch e.Type {
	case TypeCaptured:
		var c Captured
		if err := ledger.UnmarshalPayload(e.Payload, &c); err != nil || c.check() != nil {
			return nil // not a record this store wrote: nothing to keep
		}
		if kv.Get(itemKey(c.ID)) != nil {
			return nil // the first record of an id stays
		}
		seq, _ := ledger.SeqOf(kv)
		it := Item{Captured: c, Seq: seq, CapturedAt: e.Occurred(), Unsynced: e.ClockUnsynced}
		return putItem(kv, it, true)
	case TypeViewed, TypeExpired, TypeDeleted, TypeFrozen:
		var id string
		if e.Type == TypeViewed {
			var v Viewed
			if ledger.UnmarshalPayload(e.Payload, &v) != nil {
				return nil
			}
			id = v.ID
		} else {
			var d Ended
			if ledger.UnmarshalPayload(e.Payload, &d) != nil {
				return nil
			}
			id = d.ID
		}
		it, ok, err := getItem(kv, id)
		if err != nil || !ok {
			return err
		}
		switch e.Type {
		case TypeViewed:
			it.Views++
			return putItem(kv, it, false)
		case TypeFrozen:
			it.Frozen = true
			return putItem(kv, it, false)
		}
		for _, k := range [][]byte{itemKey(id), expiryKey(it.Ends(), id), hashKey(it.SHA256, id)} {
			if err := kv.Delete(k); err != nil {
				return err
			}
		}
	}
	return nil
}

func putItem(kv ledger.KV, it Item, index bool) error {
	v, err := ledger.MarshalPayload(it)
	if err != nil {
		return err
	}
	if err := kv.Put(itemKey(it.ID), v); err != nil {
		return err
	}
	if !index {
		return nil
	}
	if err := kv.Put(expiryKey(it.Ends(), it.ID), nil); err != nil {
		return err
	}
	return kv.Put(hashKey(it.SHA256, it.ID), nil)
}

func getItem(kv ledger.ReadKV, id string) (Item, bool, error) {
	v := kv.Get(itemKey(id))
	if v == nil {
		return Item{}, false, nil
	}
	var it Item
	if err := ledger.UnmarshalPayload(v, &it); err != nil {
		return Item{}, false, fmt.Errorf("evidence %s: %w", id, err)
	}
	return it, true, nil
}
