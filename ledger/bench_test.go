package ledger

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// BenchmarkDurableAppend measures durable appends from 1, 4, 16 and 64
// goroutines: the ledger's (event, id index, outbox row, expiry index, one
// commit shared by the batch) against raw bbolt writing the same record
// bytes under a sequence key, with db.Update (one key per transaction) and
// with db.Batch (default options). All on the same disk, in the same run.
// Reported: appends/s and p50/p99 latency of one append.
func BenchmarkDurableAppend(b *testing.B) {
	proto := motion(1)
	proto.ID = NewID()
	var rec bytes.Buffer
	Encode(&rec, &proto)
	record := rec.Bytes()

	for _, g := range []int{1, 4, 16, 64} {
		b.Run(fmt.Sprintf("ledger/g=%d", g), func(b *testing.B) {
			s, err := Open(Options{Path: filepath.Join(b.TempDir(), "l.db"), AgentID: testAgent, BodyID: testBody})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			run(b, g, func(i int) error {
				e := proto
				e.ID = NewID()
				_, err := s.Append(context.Background(), e)
				return err
			})
		})
		b.Run(fmt.Sprintf("bbolt-update/g=%d", g), func(b *testing.B) {
			db := rawDB(b)
			defer db.Close()
			run(b, g, func(i int) error {
				return db.Update(func(tx *bolt.Tx) error {
					bk := tx.Bucket(bEvents)
					seq, _ := bk.NextSequence()
					return bk.Put(u64(seq), record)
				})
			})
		})
		b.Run(fmt.Sprintf("bbolt-batch/g=%d", g), func(b *testing.B) {
			db := rawDB(b)
			defer db.Close()
			run(b, g, func(i int) error {
				return db.Batch(func(tx *bolt.Tx) error {
					bk := tx.Bucket(bEvents)
					seq, _ := bk.NextSequence()
					return bk.Put(u64(seq), record)
				})
			})
		})
	}
}

func rawDB(b *testing.B) *bolt.DB {
	db, err := bolt.Open(filepath.Join(b.TempDir(), "raw.db"), 0o600, nil)
	if err != nil {
		b.Fatal(err)
	}
	db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucket(bEvents)
		return err
	})
	return db
}

// run spreads b.N operations over g goroutines and reports throughput and
// the latency percentiles of single operations.
func run(b *testing.B, g int, op func(i int) error) {
	var next atomic.Int64
	lat := make([][]time.Duration, g)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for w := range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				t := time.Now()
				if err := op(int(i)); err != nil {
					b.Error(err)
					return
				}
				lat[w] = append(lat[w], time.Since(t))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) > 0 {
		b.ReportMetric(float64(len(all))/elapsed.Seconds(), "appends/s")
		b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
	}
}
