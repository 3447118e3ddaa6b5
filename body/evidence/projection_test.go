package evidence

import (
	"testing"

	"github.com/tobe-body/tobe-body/ledger"
)

// FuzzApply feeds the projection any payload under each of its types: it
// never panics, keeps only records that check, and what it keeps is
// consistent (each item with its expiry and hash keys, nothing else).
func FuzzApply(f *testing.F) {
	good := Captured{ID: ledger.NewID().String(), Kind: Snapshot, Source: "camera.front", MediaType: "image/jpeg",
		SHA256: hashOf([]byte("x")), Bytes: 1, By: "agent:pi", Privacy: "sensitive", LifetimeMS: 1000, RunningNS: 5}
	p, _ := ledger.MarshalPayload(good)
	f.Add(uint8(0), []byte(p))
	v, _ := ledger.MarshalPayload(Viewed{ID: good.ID, SHA256: good.SHA256, By: "admin", Via: "admin"})
	f.Add(uint8(1), []byte(v))
	e, _ := ledger.MarshalPayload(Ended{ID: good.ID, SHA256: good.SHA256, By: "body"})
	f.Add(uint8(2), []byte(e))
	f.Add(uint8(4), []byte{0xa1, 0x62, 'i', 'd', 0x60})
	types := []string{TypeCaptured, TypeViewed, TypeExpired, TypeDeleted, TypeFrozen}
	f.Fuzz(func(t *testing.T, which uint8, payload []byte) {
		kv := ledger.MemKV{}
		// The good record first, so the others have something to act on.
		for i, ev := range []ledger.Event{{Type: TypeCaptured, Payload: p}, {Type: types[int(which)%len(types)], Payload: payload}} {
			if err := (projection{}).Apply(ledger.AtSeq(kv, uint64(i+1)), &ev); err != nil {
				return // a store would refuse the append: nothing to check
			}
		}
		items, expiries, hashes := 0, 0, 0
		for k := range kv {
			switch k[0] {
			case 'i':
				items++
				var it Item
				if err := ledger.UnmarshalPayload(kv[k], &it); err != nil {
					t.Fatalf("kept an item that does not decode: %v", err)
				}
				if it.check() != nil {
					t.Fatalf("kept an item that does not check: %+v", it)
				}
				if !has(kv, expiryKey(it.Ends(), it.ID)) || !has(kv, hashKey(it.SHA256, it.ID)) {
					t.Fatalf("item %s lacks its expiry or hash key", it.ID)
				}
			case 'x':
				expiries++
			case 'h':
				hashes++
			default:
				t.Fatalf("unknown key %q", k)
			}
		}
		if items != expiries || items != hashes {
			t.Fatalf("%d items, %d expiry keys, %d hash keys", items, expiries, hashes)
		}
	})
}

func has(kv ledger.MemKV, k []byte) bool { _, ok := kv[string(k)]; return ok }
