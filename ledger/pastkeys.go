package ledger

import (
	"crypto/sha256"
	"encoding/binary"
	"math"

	bolt "go.etcd.io/bbolt"
)

// The past keys: what the ledger still refuses of events it archived. A
// dedupe key lives in the inbox as long as its event is in the file; when
// the event goes to the archive, its key goes here if its class keeps
// past keys (Class.PastKeys: the audit records, whose keys are the
// idempotency keys of actions and stops), and a repeat is refused after
// any restart, however old the first. The keys of other classes (the
// gate's and the world model's own) go with their events.
//
// It is a Bloom filter of fixed size, so it stays bounded whatever the
// body's age: a key once added is always found (a repeat is never taken),
// and a key never added is taken for a past one with a small probability
// (then a new action is refused as a repeat, never done twice). Sized
// for Options.PastKeys keys at 32 bits a key (16 probes in one 512-bit
// block, the block in a value of its own so an addition writes one),
// that probability is about one in a million at capacity, less below it,
// and grows past it (Stats says how many were added).
//
// Bucket past_keys: "n" -> the number of blocks (fixed when the first key
// is added), "c" -> keys added, block index (4 bytes) -> 64 bytes; a
// block never written is zero.
const (
	pastBlockBytes = 64
	pastProbes     = 16
	pastBitsPerKey = 32
	// DefaultPastKeys is Options.PastKeys when zero.
	DefaultPastKeys = 2_000_000
)

var (
	bPast      = []byte("past_keys")
	kPastN     = []byte("n")
	kPastCount = []byte("c")
)

// The kind of past key: a dedupe key (the hash's first byte, so another
// kind can join without a false match between them).
const pastDedupe = 'd'

// pastProbe is where a key's bits are: its block and the 16 bit positions
// in it.
func pastProbe(kind byte, key []byte, blocks uint64) (block uint64, bits [pastProbes]uint16) {
	h := sha256.New()
	h.Write([]byte{kind})
	h.Write(key)
	var sum [32]byte
	h.Sum(sum[:0])
	block = binary.BigEndian.Uint64(sum[:8]) % blocks
	for i := range bits {
		// 9 bits each, from the 24 bytes after the block's 8.
		bit := 64 + 9*i
		v := uint16(sum[bit/8])<<8 | uint16(sum[bit/8+1])
		bits[i] = (v >> (7 - uint(bit%8))) & (pastBlockBytes*8 - 1)
	}
	return block, bits
}

func pastBlockKey(block uint64) []byte {
	var k [4]byte
	binary.BigEndian.PutUint32(k[:], uint32(block))
	return k[:]
}

// pastBlocks is the number of blocks for capacity keys.
func pastBlocks(capacity int) uint64 {
	if capacity <= 0 {
		capacity = DefaultPastKeys
	}
	return max(1, uint64(capacity)*pastBitsPerKey/(pastBlockBytes*8))
}

// pastHas tells whether the past keys hold key: b is the bucket (nil: the
// file has none yet).
func pastHas(b *bolt.Bucket, kind byte, key []byte) bool {
	if b == nil {
		return false
	}
	blocks := getU64(b.Get(kPastN))
	if blocks == 0 {
		return false
	}
	block, bits := pastProbe(kind, key, blocks)
	v := b.Get(pastBlockKey(block))
	if len(v) != pastBlockBytes {
		return false
	}
	for _, bit := range bits {
		if v[bit/8]&(1<<(bit%8)) == 0 {
			return false
		}
	}
	return true
}

// pastHas and pastAdd of the writer's transaction.
func (w *writer) pastHas(kind byte, key []byte) bool {
	if w.past == nil {
		return false
	}
	return pastHas(w.past.b, kind, key)
}

func (w *writer) pastAdd(kind byte, key []byte) error {
	if w.past == nil {
		return errNoPastKeys
	}
	blocks := getU64(w.past.Get(kPastN))
	if blocks == 0 {
		blocks = pastBlocks(w.s.opts.PastKeys)
		if err := w.past.Put(kPastN, w.keep(u64(blocks))); err != nil {
			return err
		}
	}
	block, bits := pastProbe(kind, key, blocks)
	k := pastBlockKey(block)
	v := make([]byte, pastBlockBytes)
	copy(v, w.past.Get(k))
	for _, bit := range bits {
		v[bit/8] |= 1 << (bit % 8)
	}
	if err := w.past.Put(w.keep(k), w.keep(v)); err != nil {
		return err
	}
	return w.past.Put(kPastCount, w.keep(u64(getU64(w.past.Get(kPastCount))+1)))
}

// pastFalseRate is the chance that a key never added is found, with n
// keys added to blocks blocks (the standard estimate; one block per key
// makes it somewhat higher).
func pastFalseRate(n, blocks uint64) float64 {
	if blocks == 0 || n == 0 {
		return 0
	}
	bits := float64(blocks * pastBlockBytes * 8)
	return math.Pow(1-math.Exp(-pastProbes*float64(n)/bits), pastProbes)
}
