package ledger

// The journal: what the commit loop writes to bbolt between two folds,
// as the puts and deletes it made, so that a record is on disk with one
// small write and one fdatasync, and bbolt commits (a dozen pages and
// two fsyncs) only at a fold, for many records at once.
//
// The file is PATH.journal beside the ledger, of a fixed size allocated
// once, written from its start again after each fold. Each record is
//
//	len u32 | crc32c u32 | tag u64 | gen u64 | n u64 | body (len bytes)
//
// where tag names the ledger file (its creation time: a journal left
// beside another file is not that file's), gen is the generation (the
// fold the record will be part of: the ledger's folded generation plus
// one), n the record's number within it from 0, and the checksum covers
// tag, gen, n and the body. A body is a table
// of bucket paths, then operations on them:
//
//	paths: uvarint count, each: uvarint depth, each name: uvarint len, bytes
//	ops:   kind byte, uvarint path index, then
//	       put: uvarint len, key, uvarint len, value
//	       delete: uvarint len, key
//	       sequence: uvarint value (the bucket's sequence set to it)
//
// A scan takes the records of one generation in order from the start and
// stops at the first that is not the next: zeros never written, a record
// torn by a power cut, or one of an earlier generation left from before
// the last fold.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"
)

// JournalPath is the journal of the ledger at path.
func JournalPath(path string) string { return path + ".journal" }

const (
	journalHeader = 32
	opPut         = 'p'
	opDelete      = 'd'
	opSequence    = 's'
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// journal is the open journal file and where its next record goes.
type journal struct {
	f    *os.File
	size int64
	off  int64  // where the next record is written
	tag  uint64 // the ledger's (see the file's layout above)
	gen  uint64 // the generation of the records written now
	n    uint64 // the number of the next record
	// unsynced: a record was written since the last fdatasync.
	unsynced bool
	// buf is where a record is put together (see head).
	buf []byte
}

// openJournal opens the journal at path, creating it of size bytes (or
// keeping a larger file's size), and returns what it holds of the
// records of the ledger tag's generation gen (see readRecords).
// On a disk too full to allocate it, the journal is what the file has
// (short, or empty: then every batch is folded into bbolt at once, as a
// ledger without a journal commits), and short says so.
func openJournal(path string, size int64, tag, gen uint64) (j *journal, data []byte, short error, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("ledger: journal: %w", err)
	}
	fi, err := f.Stat()
	if err == nil && fi.Size() < size {
		err = allocate(f, size)
		if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) {
			short, err = fmt.Errorf("ledger: journal: %d bytes cannot be allocated: %w", size, err), nil
		}
		if err == nil {
			err = syncDir(filepath.Dir(path))
		}
	}
	if err == nil {
		if fi, err = f.Stat(); err == nil {
			size = fi.Size()
			data, err = readRecords(f, size, tag, gen)
		}
	}
	if err != nil {
		f.Close()
		return nil, nil, nil, fmt.Errorf("ledger: journal %s: %w", path, err)
	}
	return &journal{f: f, size: size}, data, short, nil
}

// readRecords reads the journal from its start, a record at a time, as
// far as the records of the ledger tag's generation gen go, numbered from
// 0: after a clean stop that is one header, of the generation folded
// already (a fold does not wipe the journal), not the megabytes of
// records it holds. journalRecords then checks what it read.
func readRecords(f *os.File, size int64, tag, gen uint64) ([]byte, error) {
	var data []byte
	h := make([]byte, journalHeader)
	for off, i := int64(0), uint64(0); off+journalHeader <= size; i++ {
		if _, err := f.ReadAt(h, off); err != nil {
			return nil, err
		}
		n := int64(binary.BigEndian.Uint32(h))
		if n == 0 || n > size-off-journalHeader ||
			binary.BigEndian.Uint64(h[8:]) != tag || binary.BigEndian.Uint64(h[16:]) != gen || binary.BigEndian.Uint64(h[24:]) != i {
			break
		}
		data = append(data, h...)
		start := len(data)
		data = append(data, make([]byte, n)...)
		if _, err := f.ReadAt(data[start:], off+journalHeader); err != nil {
			return nil, err
		}
		off += journalHeader + n
	}
	return data, nil
}

// journalHead is how much of a new journal is written with zeros: the
// part records go to first after every fold.
const journalHead = 1 << 20

// allocate makes f size bytes long on disk, so that writing a record
// never changes the file's size (an fdatasync then writes the record
// only, not the inode with it). Its head is written with zeros, the rest
// allocated: a block fallocate left unwritten is converted at its first
// write, which has an fdatasync commit ext4's journal too, and the head
// is where the records of every generation begin.
func allocate(f *os.File, size int64) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	err = unix.Fallocate(int(f.Fd()), 0, 0, size)
	zeroTo := min(size, journalHead)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		zeroTo, err = size, nil // a file system without fallocate: zeros, all of it
	}
	if err != nil {
		return err
	}
	// A page at a time: the page cache keeps what one write made as one
	// folio, and a record written later into a 64 KiB folio would have
	// all of it written again with each sync (16 pages where one is).
	zeros := make([]byte, 4096)
	for off := fi.Size(); off < zeroTo; off += int64(len(zeros)) {
		n := min(int64(len(zeros)), zeroTo-off)
		if _, err := f.WriteAt(zeros[:n], off); err != nil {
			return err
		}
	}
	return unix.Fdatasync(int(f.Fd()))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// journalRecords returns the bodies of the records of the ledger tag's
// generation gen in data, in order, and where the next record would go.
func journalRecords(data []byte, tag, gen uint64) (bodies [][]byte, end int64) {
	off := 0
	for n := uint64(0); ; n++ {
		if len(data)-off < journalHeader {
			break
		}
		h := data[off : off+journalHeader]
		// Compared as a uint64: a length of 2 GiB or more is negative as
		// an int of 32 bits (an ARMv7 board's).
		n32 := binary.BigEndian.Uint32(h)
		if n32 == 0 || uint64(n32) > uint64(len(data)-off-journalHeader) {
			break
		}
		size := int(n32)
		if binary.BigEndian.Uint64(h[8:]) != tag || binary.BigEndian.Uint64(h[16:]) != gen || binary.BigEndian.Uint64(h[24:]) != n {
			break
		}
		body := data[off+journalHeader : off+journalHeader+size]
		sum := crc32.Update(crc32.Checksum(h[8:journalHeader], castagnoli), castagnoli, body)
		if sum != binary.BigEndian.Uint32(h[4:]) {
			break
		}
		bodies = append(bodies, body)
		off += journalHeader + size
	}
	return bodies, int64(off)
}

// fits tells whether a record of body bytes fits after the ones written.
func (j *journal) fits(body int) bool {
	return j.off+journalHeader+int64(body) <= j.size
}

// appendOps writes the record of what a writer did (see jrec); it is on
// disk after the next sync.
func (j *journal) appendOps(r *jrec) error { return j.write(r.appendBody(j.head())) }

// head is the journal's buffer, holding the room for a record's header
// (write fills it): the buffer is the journal's own, kept from record to
// record, so that writing one allocates nothing.
func (j *journal) head() []byte {
	var zero [journalHeader]byte
	return append(j.buf[:0], zero[:]...)
}

// maxKeptBuffer bounds the buffers kept from record to record: a larger
// one, made for a large batch, goes once used.
const maxKeptBuffer = 1 << 20

// write fills in rec's header and writes it (rec is head's buffer with
// the body appended).
func (j *journal) write(rec []byte) error {
	if cap(rec) <= maxKeptBuffer {
		j.buf = rec[:0]
	} else {
		j.buf = nil
	}
	body := rec[journalHeader:]
	if !j.fits(len(body)) {
		return errors.New("ledger: journal: the record does not fit")
	}
	binary.BigEndian.PutUint32(rec, uint32(len(body)))
	binary.BigEndian.PutUint64(rec[8:], j.tag)
	binary.BigEndian.PutUint64(rec[16:], j.gen)
	binary.BigEndian.PutUint64(rec[24:], j.n)
	binary.BigEndian.PutUint32(rec[4:], crc32.Update(crc32.Checksum(rec[8:journalHeader], castagnoli), castagnoli, body))
	if _, err := j.f.WriteAt(rec, j.off); err != nil {
		return fmt.Errorf("ledger: journal: %w", err)
	}
	j.off += int64(len(rec))
	j.n++
	j.unsynced = true
	return nil
}

// sync puts what was written on disk.
func (j *journal) sync() error {
	if !j.unsynced {
		return nil
	}
	if err := unix.Fdatasync(int(j.f.Fd())); err != nil {
		return fmt.Errorf("ledger: journal: %w", err)
	}
	j.unsynced = false
	return nil
}

// restart begins generation gen at the start of the file: the records
// before are folded into bbolt.
func (j *journal) restart(gen uint64) {
	j.gen, j.n, j.off, j.unsynced = gen, 0, 0, false
}

func (j *journal) close() error { return j.f.Close() }

// jrec builds one record's body: its table of paths and its operations.
type jrec struct {
	paths map[string]int
	table []byte
	npath int
	ops   []byte
}

func (r *jrec) empty() bool { return len(r.ops) == 0 }

// path returns the index of a bucket's path in the table, adding it.
func (r *jrec) path(names [][]byte) int {
	key := string(appendPath(nil, names))
	if i, ok := r.paths[key]; ok {
		return i
	}
	if r.paths == nil {
		r.paths = map[string]int{}
	}
	i := r.npath
	r.paths[key] = i
	r.table = append(r.table, key...)
	r.npath++
	return i
}

func appendPath(b []byte, names [][]byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(names)))
	for _, n := range names {
		b = binary.AppendUvarint(b, uint64(len(n)))
		b = append(b, n...)
	}
	return b
}

func (r *jrec) put(path int, k, v []byte) {
	r.ops = append(r.ops, opPut)
	r.ops = binary.AppendUvarint(r.ops, uint64(path))
	r.ops = binary.AppendUvarint(r.ops, uint64(len(k)))
	r.ops = append(r.ops, k...)
	r.ops = binary.AppendUvarint(r.ops, uint64(len(v)))
	r.ops = append(r.ops, v...)
}

func (r *jrec) delete(path int, k []byte) {
	r.ops = append(r.ops, opDelete)
	r.ops = binary.AppendUvarint(r.ops, uint64(path))
	r.ops = binary.AppendUvarint(r.ops, uint64(len(k)))
	r.ops = append(r.ops, k...)
}

func (r *jrec) sequence(path int, n uint64) {
	r.ops = append(r.ops, opSequence)
	r.ops = binary.AppendUvarint(r.ops, uint64(path))
	r.ops = binary.AppendUvarint(r.ops, n)
}

// size is the length of the record's body.
func (r *jrec) size() int {
	var n [binary.MaxVarintLen64]byte
	return binary.PutUvarint(n[:], uint64(r.npath)) + len(r.table) + len(r.ops)
}

// appendBody appends the record's body to b.
func (r *jrec) appendBody(b []byte) []byte {
	b = binary.AppendUvarint(b, uint64(r.npath))
	b = append(b, r.table...)
	return append(b, r.ops...)
}

// journalOp is one operation of a record, its slices within the body.
type journalOp struct {
	kind  byte
	path  [][]byte
	key   []byte
	value []byte
	seq   uint64
}

// errJournal: a record whose checksum holds but whose body does not
// parse, which only a fault of the program that wrote it can make.
var errJournal = errors.New("ledger: journal: a record does not parse")

// parseJournal calls fn with each operation of a record's body in order.
func parseJournal(body []byte, fn func(op journalOp) error) error {
	b := body
	uv := func() (uint64, bool) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	bytesOf := func() ([]byte, bool) {
		n, ok := uv()
		if !ok || n > uint64(len(b)) {
			return nil, false
		}
		v := b[:n:n]
		b = b[n:]
		return v, true
	}
	npath, ok := uv()
	if !ok || npath > uint64(len(b)) {
		return fmt.Errorf("%w: its table of paths", errJournal)
	}
	paths := make([][][]byte, npath)
	for i := range paths {
		depth, ok := uv()
		if !ok || depth == 0 || depth > 8 {
			return fmt.Errorf("%w: path %d", errJournal, i)
		}
		for range depth {
			name, ok := bytesOf()
			if !ok || len(name) == 0 {
				return fmt.Errorf("%w: path %d", errJournal, i)
			}
			paths[i] = append(paths[i], name)
		}
	}
	for len(b) > 0 {
		op := journalOp{kind: b[0]}
		b = b[1:]
		p, ok := uv()
		if !ok || p >= npath {
			return fmt.Errorf("%w: an operation's path", errJournal)
		}
		op.path = paths[p]
		switch op.kind {
		case opPut:
			if op.key, ok = bytesOf(); ok {
				op.value, ok = bytesOf()
			}
		case opDelete:
			op.key, ok = bytesOf()
		case opSequence:
			op.seq, ok = uv()
		default:
			ok = false
		}
		if !ok || op.kind != opSequence && len(op.key) == 0 {
			return fmt.Errorf("%w: an operation %q", errJournal, op.kind)
		}
		if err := fn(op); err != nil {
			return err
		}
	}
	return nil
}

// jb is a bucket as the writer writes to it: each put, delete and
// sequence it sets is also an operation of the transaction's journal
// record (writer.rec), so the record does to bbolt what the writer did.
type jb struct {
	b     *bolt.Bucket
	w     *writer
	names [][]byte
	path  int // the index in w.rec's table, or -1 before the first write
	kids  map[string]*jb
	// get is the cursor Get seeks with: bbolt's Get makes a cursor, and
	// grows its stack, for every key.
	get *bolt.Cursor
}

func (w *writer) bucket(b *bolt.Bucket, names ...[]byte) *jb {
	return &jb{b: b, w: w, names: names, path: -1}
}

func (b *jb) idx() int {
	if b.path < 0 {
		b.path = b.w.rec.path(b.names)
	}
	return b.path
}

// Get is bbolt's Get, on a cursor kept for it: a seek starts from the
// bucket's root each time, so it sees every write before it.
func (b *jb) Get(k []byte) []byte {
	if b.get == nil {
		b.get = b.b.Cursor()
	}
	if got, v := b.get.Seek(k); bytes.Equal(got, k) {
		return v // nil for a nested bucket, as Get
	}
	return nil
}

func (b *jb) Cursor() *bolt.Cursor                     { return b.b.Cursor() }
func (b *jb) Sequence() uint64                         { return b.b.Sequence() }
func (b *jb) ForEach(fn func(k, v []byte) error) error { return b.b.ForEach(fn) }

func (b *jb) Put(k, v []byte) error {
	if err := b.b.Put(k, v); err != nil {
		return err
	}
	b.w.rec.put(b.idx(), k, v)
	return nil
}

func (b *jb) Delete(k []byte) error {
	if err := b.b.Delete(k); err != nil {
		return err
	}
	b.w.rec.delete(b.idx(), k)
	return nil
}

func (b *jb) NextSequence() (uint64, error) {
	n, err := b.b.NextSequence()
	if err != nil {
		return 0, err
	}
	b.w.rec.sequence(b.idx(), n)
	return n, nil
}

// child is a bucket nested in b, or nil; the writer keeps the ones it
// looked up.
func (b *jb) child(name []byte) *jb {
	if c, ok := b.kids[string(name)]; ok {
		return c
	}
	c := b.b.Bucket(name)
	if c == nil {
		return nil
	}
	if b.kids == nil {
		b.kids = map[string]*jb{}
	}
	kid := b.w.bucket(c, append(slices.Clip(b.names), name)...)
	b.kids[string(name)] = kid
	return kid
}

// replayJournal does to tx what the records' bodies did, in order.
func replayJournal(tx *bolt.Tx, bodies [][]byte) error {
	for _, b := range bodies {
		if err := replayRecord(tx, b); err != nil {
			return err
		}
	}
	return nil
}

// replayRecord does to tx what a record's body did.
func replayRecord(tx *bolt.Tx, body []byte) error {
	return parseJournal(body, func(op journalOp) error {
		b := tx.Bucket(op.path[0])
		for _, name := range op.path[1:] {
			if b == nil {
				break
			}
			b = b.Bucket(name)
		}
		if b == nil {
			return fmt.Errorf("%w: no bucket %q", errJournal, bytes.Join(op.path, []byte("/")))
		}
		switch op.kind {
		case opPut:
			return b.Put(op.key, op.value)
		case opDelete:
			return b.Delete(op.key)
		default:
			return b.SetSequence(op.seq)
		}
	})
}
