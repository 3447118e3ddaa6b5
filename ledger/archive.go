package ledger

import (
	"bytes"
	"compress/flate"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// The archive keeps the events of the classes without a TTL (audit
// records, the control plane's and the world model's) once they are older
// than Options.AuditKeep by the running clock, out of the bbolt file, in
// segments beside it: ledger.db.archive/00000001.seg, ...
//
// A segment is one file, written once, synced and renamed into place
// before the transaction that deletes its events from the ledger:
//
//	header  "TBARCH1\n", then big-endian uint64s: the ledger's tag (its
//	        creation time), the segment's index (1, 2, ...), the first and
//	        the last sequence it holds, how many events, and the body's
//	        length; then the hash of the segment before it (32 bytes, zero
//	        for the first)
//	body    raw DEFLATE of the events, each: uint64 sequence, uvarint
//	        length, the record as the ledger stored it (CBOR)
//	trailer SHA-256 of header and body: the segment's hash
//
// Each segment names the hash of the one before it, and the ledger's meta
// record (archiveHead) the last one's and how many: a segment changed,
// left out, put in or cut off is found by `ledger verify --archive`,
// without the body running. The archived events always precede every
// event the file still holds: a pass archives from the oldest event on
// and stops at the first it may not take yet.

const (
	segMagic     = "TBARCH1\n"
	segHeaderLen = len(segMagic) + 6*8 + sha256.Size
	segSuffix    = ".seg"
	// segMaxRaw bounds a segment's events, as stored: a read of the
	// archive from some sequence on inflates at most this much before
	// the first event it wants.
	segMaxRaw = 1 << 20
	// DefaultArchiveSegment is Options.ArchiveSegment when zero.
	DefaultArchiveSegment = 512 << 10
)

// ArchiveDir is the directory of the archive of the ledger at path.
func ArchiveDir(path string) string { return path + ".archive" }

// errArchive: a segment is not what its header, its hash or the chain says.
var errArchive = errors.New("ledger: archive")

// segment is one archive file as its header and trailer describe it.
type segment struct {
	Path         string
	Index        uint64
	Tag          uint64
	First, Last  uint64
	Count        uint64
	BodyLen      uint64
	Prev, Hash   [32]byte
	Size         int64
	headerParsed bool
}

func segName(index uint64) string { return fmt.Sprintf("%08d%s", index, segSuffix) }

// archived is one event as a segment keeps it.
type archived struct {
	seq uint64
	rec []byte
}

// writeSegment writes the events (in sequence order) as segment index of
// the archive in dir, synced, and renames it into place.
func writeSegment(dir string, tag, index uint64, prev [32]byte, evs []archived) (segment, error) {
	seg := segment{Index: index, Tag: tag, First: evs[0].seq, Last: evs[len(evs)-1].seq, Count: uint64(len(evs)), Prev: prev}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return seg, err
	}
	var body bytes.Buffer
	fw, err := flate.NewWriter(&body, flate.BestCompression)
	if err != nil {
		return seg, err
	}
	var hdr [8 + binary.MaxVarintLen64]byte
	for _, e := range evs {
		binary.BigEndian.PutUint64(hdr[:8], e.seq)
		n := binary.PutUvarint(hdr[8:], uint64(len(e.rec)))
		fw.Write(hdr[:8+n])
		fw.Write(e.rec)
	}
	if err := fw.Close(); err != nil {
		return seg, err
	}
	seg.BodyLen = uint64(body.Len())
	file := append(seg.header(), body.Bytes()...)
	seg.Hash = sha256.Sum256(file)
	file = append(file, seg.Hash[:]...)
	seg.Size = int64(len(file))
	seg.Path = filepath.Join(dir, segName(index))
	tmp := seg.Path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return seg, err
	}
	_, err = f.Write(file)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, seg.Path)
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		os.Remove(tmp)
		return seg, fmt.Errorf("ledger: archive segment %d: %w", index, err)
	}
	return seg, nil
}

func (s *segment) header() []byte {
	b := make([]byte, 0, segHeaderLen)
	b = append(b, segMagic...)
	for _, v := range []uint64{s.Tag, s.Index, s.First, s.Last, s.Count, s.BodyLen} {
		b = binary.BigEndian.AppendUint64(b, v)
	}
	return append(b, s.Prev[:]...)
}

// parseHeader reads a segment's header and trailer from its file's bytes
// (or the first segHeaderLen of them, with size the file's length, when
// trailer is nil).
func parseSegment(b []byte, size int64) (segment, error) {
	var s segment
	if len(b) < segHeaderLen || string(b[:len(segMagic)]) != segMagic {
		return s, fmt.Errorf("%w: not a segment (no header)", errArchive)
	}
	p := b[len(segMagic):]
	vals := make([]uint64, 6)
	for i := range vals {
		vals[i] = binary.BigEndian.Uint64(p[8*i:])
	}
	s.Tag, s.Index, s.First, s.Last, s.Count, s.BodyLen = vals[0], vals[1], vals[2], vals[3], vals[4], vals[5]
	copy(s.Prev[:], p[48:])
	s.Size = size
	if s.BodyLen != uint64(size)-uint64(segHeaderLen+sha256.Size) || size < int64(segHeaderLen+sha256.Size) {
		return s, fmt.Errorf("%w: segment %d is %d bytes; its header says %d of body", errArchive, s.Index, size, s.BodyLen)
	}
	if s.Count == 0 || s.First > s.Last || s.Last-s.First+1 < s.Count {
		return s, fmt.Errorf("%w: segment %d: %d events from %d to %d", errArchive, s.Index, s.Count, s.First, s.Last)
	}
	s.headerParsed = true
	return s, nil
}

// segmentIndexes lists the segment files in dir by index, and the names
// of anything else there that is not a segment (a .tmp a crash left).
func segmentIndexes(dir string) (idx []uint64, other []string, err error) {
	des, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	for _, de := range des {
		name := de.Name()
		n, err := strconv.ParseUint(strings.TrimSuffix(name, segSuffix), 10, 64)
		if !strings.HasSuffix(name, segSuffix) || err != nil || name != segName(n) {
			other = append(other, name)
			continue
		}
		idx = append(idx, n)
	}
	slices.Sort(idx)
	return idx, other, nil
}

// readSegmentHeader reads the header of segment index in dir.
func readSegmentHeader(dir string, index uint64) (segment, error) {
	path := filepath.Join(dir, segName(index))
	f, err := os.Open(path)
	if err != nil {
		return segment{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return segment{}, err
	}
	b := make([]byte, segHeaderLen)
	if _, err := io.ReadFull(f, b); err != nil {
		return segment{}, fmt.Errorf("%w: %s: %v", errArchive, path, err)
	}
	s, err := parseSegment(b, fi.Size())
	s.Path = path
	if err == nil && s.Index != index {
		err = fmt.Errorf("%w: %s says it is segment %d", errArchive, path, s.Index)
	}
	return s, err
}

// readSegment reads segment index in dir whole: its hash is checked, and
// fn is called with each event after the sequence after, in order (rec is
// valid only during the call; fn may stop the read with errStopRead).
func readSegment(dir string, index, after uint64, fn func(seq uint64, rec []byte) error) (segment, error) {
	path := filepath.Join(dir, segName(index))
	b, err := os.ReadFile(path)
	if err != nil {
		return segment{}, err
	}
	s, err := parseSegment(b, int64(len(b)))
	s.Path = path
	if err != nil {
		return s, err
	}
	if s.Index != index {
		return s, fmt.Errorf("%w: %s says it is segment %d", errArchive, path, s.Index)
	}
	end := len(b) - sha256.Size
	copy(s.Hash[:], b[end:])
	if sha256.Sum256(b[:end]) != s.Hash {
		return s, fmt.Errorf("%w: segment %d: its hash does not match its contents", errArchive, index)
	}
	raw, err := io.ReadAll(flate.NewReader(bytes.NewReader(b[segHeaderLen:end])))
	if err != nil {
		return s, fmt.Errorf("%w: segment %d: %v", errArchive, index, err)
	}
	var n, last uint64
	for len(raw) > 0 {
		if len(raw) < 9 {
			return s, fmt.Errorf("%w: segment %d: a torn event after %d", errArchive, index, last)
		}
		seq := binary.BigEndian.Uint64(raw)
		l, k := binary.Uvarint(raw[8:])
		if k <= 0 || l > uint64(len(raw)-8-k) {
			return s, fmt.Errorf("%w: segment %d: event %d: a length past the end", errArchive, index, seq)
		}
		rec := raw[8+k : 8+k+int(l)]
		raw = raw[8+k+int(l):]
		if seq < s.First || seq > s.Last || n > 0 && seq <= last {
			return s, fmt.Errorf("%w: segment %d: event %d out of order (after %d, within %d-%d)", errArchive, index, seq, last, s.First, s.Last)
		}
		n, last = n+1, seq
		if seq <= after {
			continue
		}
		if err := fn(seq, rec); err != nil {
			return s, err
		}
	}
	if n != s.Count || last != s.Last {
		return s, fmt.Errorf("%w: segment %d holds %d events to %d; its header says %d to %d", errArchive, index, n, last, s.Count, s.Last)
	}
	return s, nil
}

// errStopRead ends a read of the archive early, without error.
var errStopRead = errors.New("stop")
