package ledger

import (
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Schema is the version of the file layout this code writes.
const Schema = 1

// migrations bring a file from version i to i+1; migrations[0] creates the
// layout in a new file. They only go forward, and each runs in the
// transaction that records the new version.
var migrations = []func(tx *bolt.Tx, now time.Time) error{
	// 0 -> 1: the first layout.
	func(tx *bolt.Tx, now time.Time) error {
		for _, name := range layout[1:] {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		return tx.Bucket(bMeta).Put(kCreated, u64(uint64(now.UnixNano())))
	},
}

// migrate runs the migrations the file needs, refusing a newer file. It
// says whether it changed anything.
func migrate(tx *bolt.Tx, now time.Time) (changed bool, err error) {
	changed = tx.Bucket(bMeta) == nil
	meta, err := tx.CreateBucketIfNotExists(bMeta)
	if err != nil {
		return false, err
	}
	v := uint64(0)
	if b := meta.Get(kSchema); b != nil {
		v = getU64(b)
	} else if tx.Bucket(bEvents) != nil {
		return false, fmt.Errorf("%w: it has events but no schema version", ErrDamaged)
	}
	if v > Schema {
		return false, fmt.Errorf("%w: version %d, this tobe-body reads up to %d", ErrNewerSchema, v, Schema)
	}
	for ; v < Schema; v++ {
		if err := migrations[v](tx, now); err != nil {
			return false, fmt.Errorf("ledger: migrating from schema %d: %w", v, err)
		}
		if err := meta.Put(kSchema, u64(v+1)); err != nil {
			return false, err
		}
		changed = true
	}
	return changed, checkLayout(tx)
}

// layout is every bucket a file of this schema has.
var layout = [][]byte{bMeta, bEvents, bIDs, bInbox, bInboxExp, bAggregates, bProj}

// checkLayout refuses a file that misses a bucket of its schema.
func checkLayout(tx *bolt.Tx) error {
	for _, name := range layout {
		if tx.Bucket(name) == nil {
			return fmt.Errorf("%w: it has no %s bucket", ErrDamaged, name)
		}
	}
	return nil
}
