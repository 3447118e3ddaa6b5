package ledger

import (
	"bytes"
	"encoding/binary"
	"sort"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// Projection is state derived from events, kept in its own bucket and
// updated in the transaction that appends the events. It must be a pure
// function of the events it follows, in order: verify rebuilds it from
// them and compares.
type Projection interface {
	// Name names its bucket.
	Name() string
	// Types lists the event types it follows; "camera." follows every
	// camera event. Types of classes that expire cannot be followed.
	Types() []string
	// Apply changes the state for one event.
	Apply(kv KV, e *Event) error
}

// KV is a projection's bucket: a sorted key-value map.
type KV interface {
	Get(key []byte) []byte
	Put(key, value []byte) error
	Delete(key []byte) error
	// ForEach visits the keys in order.
	ForEach(fn func(k, v []byte) error) error
}

func follows(p Projection, eventType string) bool {
	for _, t := range p.Types() {
		if t == eventType || strings.HasSuffix(t, ".") && strings.HasPrefix(eventType, t) {
			return true
		}
	}
	return false
}

// boltKV is a projection bucket inside a write transaction; what it is
// given to keep is copied into the writer's arena.
type boltKV struct {
	b *bolt.Bucket
	w *writer
}

func (kv boltKV) Get(k []byte) []byte                      { return kv.b.Get(k) }
func (kv boltKV) Put(k, v []byte) error                    { return kv.b.Put(kv.w.keep(k), kv.w.keep(v)) }
func (kv boltKV) Delete(k []byte) error                    { return kv.b.Delete(k) }
func (kv boltKV) ForEach(fn func(k, v []byte) error) error { return kv.b.ForEach(fn) }

// memKV is a projection rebuilt in memory by verify.
type memKV map[string][]byte

func (m memKV) Get(k []byte) []byte { return m[string(k)] }
func (m memKV) Put(k, v []byte) error {
	m[string(k)] = bytes.Clone(v)
	return nil
}
func (m memKV) Delete(k []byte) error {
	delete(m, string(k))
	return nil
}
func (m memKV) ForEach(fn func(k, v []byte) error) error {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := fn([]byte(k), m[k]); err != nil {
			return err
		}
	}
	return nil
}

// TypeCounts is a projection that counts events by type, for the types it
// is given. `ledger stats` shows it.
type TypeCounts struct {
	Follow []string
}

func (TypeCounts) Name() string      { return "type_counts" }
func (p TypeCounts) Types() []string { return p.Follow }

func (TypeCounts) Apply(kv KV, e *Event) error {
	n := getU64(kv.Get([]byte(e.Type)))
	return kv.Put([]byte(e.Type), u64(n+1))
}

func putU32(b []byte, v uint32) { binary.BigEndian.PutUint32(b, v) }
func putU64(b []byte, v uint64) { binary.BigEndian.PutUint64(b, v) }
func getU32(b []byte) uint32 {
	if len(b) < 4 {
		return 0
	}
	return binary.BigEndian.Uint32(b)
}
