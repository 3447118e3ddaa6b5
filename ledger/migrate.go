package ledger

import (
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Schema is the version of the file layout this code writes.
const Schema = 2

// migrations bring a file from version i to i+1; migrations[0] creates the
// layout in a new file. They only go forward, and each runs in the
// transaction that records the new version.
var migrations = []func(tx *bolt.Tx, now time.Time) error{
	// 0 -> 1: the first layout.
	func(tx *bolt.Tx, now time.Time) error {
		for _, name := range [][]byte{bEvents, bIDs, bInbox, bInboxExp, bAggregates, bProj} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		return tx.Bucket(bMeta).Put(kCreated, u64(uint64(now.UnixNano())))
	},
	// 1 -> 2: dedupe keys live as long as their events, and age is told by
	// the running clock. The expiry index goes; the expiries left in the
	// inbox's values are ignored, so every key stored is still honoured.
	// A key whose event is no longer stored (possible only with a class
	// whose dedupe window outlived its TTL) is deleted. The clock bucket
	// starts with a checkpoint at the next sequence at running time 0:
	// the events the file holds count as born when it was migrated.
	func(tx *bolt.Tx, now time.Time) error {
		if tx.Bucket(bInboxExp) != nil {
			if err := tx.DeleteBucket(bInboxExp); err != nil {
				return err
			}
		}
		inbox, events := tx.Bucket(bInbox), tx.Bucket(bEvents)
		var orphans [][]byte
		c := inbox.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if len(v) != 16 || events.Get(v[8:]) == nil {
				orphans = append(orphans, append([]byte(nil), k...))
			}
		}
		for _, k := range orphans {
			if err := inbox.Delete(k); err != nil {
				return err
			}
		}
		if _, err := tx.CreateBucketIfNotExists(bClock); err != nil {
			return err
		}
		return putCheckpoint(tx.Bucket(bEvents), tx.Bucket(bClock), 0)
	},
}

// migrate runs the migrations the file needs, refusing a newer file. It
// says whether it changed anything, and whether a migration ran.
func migrate(tx *bolt.Tx, now time.Time) (changed, migrated bool, err error) {
	changed = tx.Bucket(bMeta) == nil
	meta, err := tx.CreateBucketIfNotExists(bMeta)
	if err != nil {
		return false, false, err
	}
	v := uint64(0)
	if b := meta.Get(kSchema); b != nil {
		v = getU64(b)
	} else if tx.Bucket(bEvents) != nil {
		return false, false, fmt.Errorf("%w: it has events but no schema version", ErrDamaged)
	}
	if v > Schema {
		return false, false, fmt.Errorf("%w: version %d, this tobe-body reads up to %d", ErrNewerSchema, v, Schema)
	}
	for ; v < Schema; v++ {
		if err := migrations[v](tx, now); err != nil {
			return false, false, fmt.Errorf("ledger: migrating from schema %d: %w", v, err)
		}
		if err := meta.Put(kSchema, u64(v+1)); err != nil {
			return false, false, err
		}
		changed, migrated = true, true
	}
	// The past keys came after schema 2 without a version of their own:
	// a file without them has none to honour.
	if tx.Bucket(bPast) == nil {
		if _, err := tx.CreateBucket(bPast); err != nil {
			return false, false, err
		}
		changed = true
	}
	return changed, migrated, checkLayout(tx)
}

// layout is every bucket a file of this schema has.
var layout = [][]byte{bMeta, bEvents, bIDs, bInbox, bAggregates, bProj, bClock}

// checkLayout refuses a file that misses a bucket of its schema.
func checkLayout(tx *bolt.Tx) error {
	for _, name := range layout {
		if tx.Bucket(name) == nil {
			return fmt.Errorf("%w: it has no %s bucket", ErrDamaged, name)
		}
	}
	return nil
}
