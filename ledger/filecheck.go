package ledger

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"time"
)

// A file's state is what inspect learned of it before bbolt maps it.
type fileState struct {
	// clean: the file is as the last Close left it. The close record in
	// its meta bucket names the transaction the file is at, and bbolt's
	// free list is written, so bbolt maps it without reading every page
	// to rebuild the list.
	clean bool
	rec   closeRecord // what that Close recorded, when clean
	// The pages the free list names, when clean: CheckAll can tell
	// whether one of them is in use only while the file is still at the
	// transaction Open found.
	freeIDs []uint64
	full    bool  // every page was read
	free    int64 // bytes of the file no page uses: what compaction would give back
}

// errLocked: another process holds the file.
var errLocked = errors.New("locked by another process")

// inspect reads a bbolt file's structure with plain reads, before bbolt
// maps it, under a shared lock (a process writing the file makes it wait,
// then fail with errLocked, instead of reading a file that moves).
//
// A clean file (see fileState) gets the quick check unless full is set:
// both meta pages, the root bucket's pages, the root page of every
// top-level bucket, and the free list. That is what bbolt reads to map a
// file whose free list is written and to open its buckets. Any other
// file - one whose writer stopped without Close, one a meta page of which
// is torn, one written by another program - gets the whole walk: every
// page reference of every bucket's tree is inside the file, below the
// high-water mark, names a page that says it is that page, is of the
// right type, is referenced once, and holds its elements inside itself;
// no page the free list names is in use. bbolt trusts all of these and,
// on a damaged file, faults, asserts in goroutines of its own (rebuilding
// the free list of a file without one reads every page), or loops for
// ever in a cursor; nothing here can.
//
// Errors wrap ErrDamaged, errLocked, or the file system's error.
//
// The layout is bbolt's (v1.3 and v1.4 file format 2), in the machine's
// byte order, which is little-endian on every target of the body.
func inspect(path string, full bool, lockTimeout time.Duration) (fileState, error) {
	f, err := os.Open(path)
	if err != nil {
		return fileState{}, fmt.Errorf("ledger: %w", err)
	}
	defer f.Close()
	if err := lockShared(f, lockTimeout); err != nil {
		return fileState{}, err
	}
	fi, err := f.Stat()
	if err != nil {
		return fileState{}, fmt.Errorf("ledger: %w", err)
	}
	st, err := checkFile(&fileChecker{f: f, size: fi.Size()}, full)
	if err != nil {
		return st, fmt.Errorf("%w: %v", ErrDamaged, err)
	}
	return st, nil
}

// precheck is the whole walk of a file that is not open; it returns the
// bytes no page uses.
func precheck(path string, lockTimeout time.Duration) (free int64, err error) {
	st, err := inspect(path, true, lockTimeout)
	return st.free, err
}

func checkFile(c *fileChecker, full bool) (fileState, error) {
	m, err := c.meta()
	if err != nil {
		return fileState{}, err
	}
	c.ps, c.hwm = uint64(m.pageSize), m.pgid
	// bbolt reads both meta pages and asserts each says which it is.
	intact := true
	for id := uint64(0); id < 2; id++ {
		var buf [pageHeader + 64]byte
		if _, err := c.f.ReadAt(buf[:], int64(id*c.ps)); err != nil {
			return fileState{}, fmt.Errorf("meta page %d: %v", id, err)
		}
		if got, flags := le.Uint64(buf[0:]), le.Uint16(buf[8:]); got != id || flags != flagMeta {
			return fileState{}, fmt.Errorf("meta page %d says it is page %d of type %#x", id, got, flags)
		}
		// A meta page that does not check is a torn write: bbolt uses
		// the other, of the transaction before.
		if _, err := parseMeta(buf[:]); err != nil {
			intact = false
		}
	}
	if c.hwm*c.ps > uint64(c.size) {
		return fileState{}, fmt.Errorf("the meta page says %d pages of %d bytes; the file has %d bytes", c.hwm, c.ps, c.size)
	}
	if !full && intact && m.freelist != noFreelist {
		c.reset(true)
		free, freeIDs, err := c.freelistAndTree(m)
		if err != nil {
			return fileState{}, err
		}
		if rec, ok := parseCloseRecord(c.closeRec); ok && rec.txid == m.txid {
			return fileState{clean: true, rec: rec, freeIDs: freeIDs, free: free}, nil
		}
	}
	c.reset(false)
	free, _, err := c.freelistAndTree(m)
	if err != nil {
		return fileState{}, err
	}
	return fileState{full: true, free: free}, nil
}

// freelistAndTree checks the free list and the tree from the root bucket
// (all of it, or with quick set the root bucket's pages and each
// top-level bucket's root page), and that no free page is one in use. It
// returns the bytes of the file no page uses (with quick, those the free
// list names and those past the high-water mark), and the pages the free
// list names.
func (c *fileChecker) freelistAndTree(m metaPage) (free int64, freeIDs []uint64, err error) {
	if m.freelist != noFreelist {
		if freeIDs, err = c.freelist(m.freelist); err != nil {
			return 0, nil, err
		}
	}
	if err := c.tree(m.root, 0, "root"); err != nil {
		return 0, nil, err
	}
	if err := c.notInUse(freeIDs); err != nil {
		return 0, nil, err
	}
	if c.quick {
		return int64(uint64(len(freeIDs))*c.ps) + c.size - int64(c.hwm*c.ps), freeIDs, nil
	}
	return c.size - int64((2+c.used)*c.ps), freeIDs, nil // two meta pages and every page reached
}

// notInUse refuses a free page that the tree read so far uses: bbolt would
// give it to a new page and overwrite what the tree holds there.
func (c *fileChecker) notInUse(freeIDs []uint64) error {
	for _, id := range freeIDs {
		if c.isSeen(id) {
			return fmt.Errorf("freelist: page %d is free and in use", id)
		}
	}
	return nil
}

const (
	bboltMagic   = 0xED0CDAED
	bboltVersion = 2
	noFreelist   = ^uint64(0)
	pageHeader   = 16
	elemSize     = 16
	flagBranch   = 0x01
	flagLeaf     = 0x02
	flagMeta     = 0x04
	flagFreelist = 0x10
	bucketFlag   = 0x01
	maxTreeDepth = 64
)

var le = binary.LittleEndian

// closeRecWhere is where the close record lives, as the checker names it.
var closeRecWhere = "root/" + string(bMeta)

type metaPage struct {
	pageSize uint32
	root     uint64
	freelist uint64
	pgid     uint64
	txid     uint64
}

type fileChecker struct {
	f       io.ReaderAt
	size    int64
	ps, hwm uint64
	ctx     context.Context // nil: never cancelled
	// quick: below the root bucket, read only each top-level bucket's
	// root page (see inspect).
	quick    bool
	seen     []uint64 // a bit for each page reached
	used     uint64   // pages reached
	reads    int
	closeRec []byte // the meta bucket's close record, if met
}

// reset forgets what an earlier pass saw.
func (c *fileChecker) reset(quick bool) {
	c.quick, c.used, c.closeRec = quick, 0, nil
	c.seen = make([]uint64, (c.hwm+63)/64)
}

func (c *fileChecker) isSeen(id uint64) bool {
	return id < c.hwm && c.seen[id/64]&(1<<(id%64)) != 0
}

// meta returns the meta page bbolt would use: the valid one with the
// higher transaction id.
func (c *fileChecker) meta() (metaPage, error) {
	var best metaPage
	found := false
	var why error
	for _, off := range []int64{0, 4096, 8192, 16384, 32768, 65536} {
		var buf [pageHeader + 64]byte
		if _, err := c.f.ReadAt(buf[:], off); err != nil {
			if why == nil {
				why = fmt.Errorf("no meta page at %d: the file is too short (%d bytes)", off, c.size)
			}
			continue
		}
		m, err := parseMeta(buf[:])
		if err != nil {
			if why == nil {
				why = err
			}
			continue
		}
		// The second meta page sits one page after the first.
		if off != 0 && int64(m.pageSize) != off {
			continue
		}
		if !found || m.txid > best.txid {
			best, found = m, true
		}
	}
	if !found {
		return best, fmt.Errorf("no valid meta page: %v", why)
	}
	return best, nil
}

func parseMeta(p []byte) (metaPage, error) {
	if le.Uint16(p[8:]) != flagMeta {
		return metaPage{}, errors.New("invalid database: the first page is not a meta page")
	}
	m := p[pageHeader:]
	if le.Uint32(m[0:]) != bboltMagic {
		return metaPage{}, errors.New("invalid database: wrong magic")
	}
	if v := le.Uint32(m[4:]); v != bboltVersion {
		return metaPage{}, fmt.Errorf("invalid database: format version %d", v)
	}
	h := fnv.New64a()
	h.Write(m[:56])
	if h.Sum64() != le.Uint64(m[56:]) {
		return metaPage{}, errors.New("invalid database: meta checksum")
	}
	mp := metaPage{pageSize: le.Uint32(m[8:]), root: le.Uint64(m[16:]), freelist: le.Uint64(m[32:]), pgid: le.Uint64(m[40:]), txid: le.Uint64(m[48:])}
	if mp.pageSize < 512 || mp.pageSize > 1<<16 || mp.pageSize&(mp.pageSize-1) != 0 {
		return metaPage{}, fmt.Errorf("invalid database: page size %d", mp.pageSize)
	}
	return mp, nil
}

// page reads page id whole, with its overflow, and checks its header.
func (c *fileChecker) page(id uint64, want uint16, where string) ([]byte, error) {
	if id < 2 || id >= c.hwm {
		return nil, fmt.Errorf("%s: page %d is outside 2..%d", where, id, c.hwm-1)
	}
	var head [pageHeader]byte
	if _, err := c.f.ReadAt(head[:], int64(id*c.ps)); err != nil {
		return nil, fmt.Errorf("%s: page %d: %v", where, id, err)
	}
	if got := le.Uint64(head[0:]); got != id {
		return nil, fmt.Errorf("%s: page %d says it is page %d", where, id, got)
	}
	if flags := le.Uint16(head[8:]); flags&want == 0 || flags&^(flagBranch|flagLeaf|flagMeta|flagFreelist) != 0 {
		return nil, fmt.Errorf("%s: page %d has type %#x", where, id, flags)
	}
	overflow := uint64(le.Uint32(head[12:]))
	if id+overflow >= c.hwm {
		return nil, fmt.Errorf("%s: page %d runs %d pages past the end", where, id, overflow)
	}
	for i := id; i <= id+overflow; i++ {
		if c.isSeen(i) {
			return nil, fmt.Errorf("%s: page %d is referenced twice", where, i)
		}
		c.seen[i/64] |= 1 << (i % 64)
		c.used++
	}
	if c.reads++; c.ctx != nil && c.reads%1024 == 0 {
		if err := c.ctx.Err(); err != nil {
			return nil, err
		}
	}
	buf := make([]byte, (1+overflow)*c.ps)
	if _, err := c.f.ReadAt(buf, int64(id*c.ps)); err != nil && err != io.EOF {
		return nil, fmt.Errorf("%s: page %d: %v", where, id, err)
	}
	return buf, nil
}

// freelist checks the free list's page and returns the ids it names,
// which bbolt writes in increasing order.
func (c *fileChecker) freelist(id uint64) ([]uint64, error) {
	p, err := c.page(id, flagFreelist, "freelist")
	if err != nil {
		return nil, err
	}
	start, count := pageHeader, uint64(le.Uint16(p[10:]))
	if count == 0xFFFF {
		if len(p) < pageHeader+8 {
			return nil, errors.New("freelist: short page")
		}
		count, start = le.Uint64(p[pageHeader:]), pageHeader+8
	}
	if count > uint64(len(p)-start)/8 {
		return nil, fmt.Errorf("freelist: %d ids do not fit its page", count)
	}
	ids := make([]uint64, count)
	for i := range count {
		fid := le.Uint64(p[start+int(i)*8:])
		if fid < 2 || fid >= c.hwm {
			return nil, fmt.Errorf("freelist: free page %d is outside the file", fid)
		}
		if i > 0 && fid <= ids[i-1] {
			return nil, fmt.Errorf("freelist: page %d follows %d", fid, ids[i-1])
		}
		ids[i] = fid
	}
	return ids, nil
}

// tree checks a bucket's tree from its root page.
func (c *fileChecker) tree(id uint64, depth int, where string) error {
	_, err := c.subtree(id, depth, where, nil, nil)
	return err
}

// subtree checks the page id and what hangs below it. Its keys must
// increase, and lie in [min, max) (nil: unbounded), as bbolt's own check
// requires: bbolt panics, in a goroutine of its own, when a file it opens
// breaks that. It returns the largest key below the page.
func (c *fileChecker) subtree(id uint64, depth int, where string, min, max []byte) ([]byte, error) {
	if depth > maxTreeDepth {
		return nil, fmt.Errorf("%s: the tree is deeper than %d", where, maxTreeDepth)
	}
	p, err := c.page(id, flagBranch|flagLeaf, where)
	if err != nil {
		return nil, err
	}
	return c.node(p, depth, where, id, min, max)
}

// node checks one branch or leaf page (or an inline bucket's page).
func (c *fileChecker) node(p []byte, depth int, where string, id uint64, min, max []byte) ([]byte, error) {
	if len(p) < pageHeader {
		return nil, fmt.Errorf("%s: page %d is short", where, id)
	}
	flags, count := le.Uint16(p[8:]), int(le.Uint16(p[10:]))
	if pageHeader+count*elemSize > len(p) {
		return nil, fmt.Errorf("%s: page %d claims %d elements, more than fit", where, id, count)
	}
	if flags != flagBranch && flags != flagLeaf {
		return nil, fmt.Errorf("%s: page %d has type %#x where a branch or leaf belongs", where, id, flags)
	}
	if flags == flagBranch && count == 0 {
		// A cursor descending it would read an element that is not there.
		return nil, fmt.Errorf("%s: branch page %d is empty", where, id)
	}
	// Quick: below the root bucket's pages only the page itself is read.
	shallow := c.quick && where != "root"
	prev := min
	var largest []byte
	order := func(i int, key []byte) error {
		switch {
		case i == 0 && prev != nil && bytes.Compare(prev, key) > 0,
			i > 0 && bytes.Compare(prev, key) >= 0:
			return fmt.Errorf("%s: page %d: key %d is out of order", where, id, i)
		case max != nil && bytes.Compare(key, max) >= 0:
			return fmt.Errorf("%s: page %d: key %d is not below its parent's next key", where, id, i)
		}
		return nil
	}
	for i := range count {
		e := pageHeader + i*elemSize
		switch flags {
		case flagBranch:
			pos, ksize := int(le.Uint32(p[e:])), int(le.Uint32(p[e+4:]))
			if e+pos+ksize > len(p) || pos < 0 || ksize < 0 {
				return nil, fmt.Errorf("%s: page %d element %d lies outside the page", where, id, i)
			}
			key := p[e+pos : e+pos+ksize]
			if err := order(i, key); err != nil {
				return nil, err
			}
			hi := max
			if i < count-1 {
				n := pageHeader + (i+1)*elemSize
				npos, nksize := int(le.Uint32(p[n:])), int(le.Uint32(p[n+4:]))
				if n+npos+nksize > len(p) || npos < 0 || nksize < 0 {
					return nil, fmt.Errorf("%s: page %d element %d lies outside the page", where, id, i+1)
				}
				hi = p[n+npos : n+npos+nksize]
			}
			child := le.Uint64(p[e+8:])
			if shallow {
				if child < 2 || child >= c.hwm {
					return nil, fmt.Errorf("%s: page %d element %d names page %d, outside 2..%d", where, id, i, child, c.hwm-1)
				}
				prev, largest = key, key
				continue
			}
			sub, err := c.subtree(child, depth+1, where, key, hi)
			if err != nil {
				return nil, err
			}
			prev, largest = sub, sub
		case flagLeaf:
			eflags, pos, ksize, vsize := le.Uint32(p[e:]), int(le.Uint32(p[e+4:])), int(le.Uint32(p[e+8:])), int(le.Uint32(p[e+12:]))
			end := e + pos + ksize + vsize
			if pos < 0 || ksize < 0 || vsize < 0 || end > len(p) || end < e {
				return nil, fmt.Errorf("%s: page %d element %d lies outside the page", where, id, i)
			}
			key := p[e+pos : e+pos+ksize]
			if err := order(i, key); err != nil {
				return nil, err
			}
			prev, largest = key, key
			v := p[e+pos+ksize : end]
			if eflags&bucketFlag == 0 {
				if where == closeRecWhere && bytes.Equal(key, kClosed) {
					c.closeRec = v
				}
				continue
			}
			name := string(key)
			if len(v) < 16 {
				return nil, fmt.Errorf("%s: bucket %q has a short header", where, name)
			}
			if root := le.Uint64(v); root != 0 && shallow {
				if root < 2 || root >= c.hwm {
					return nil, fmt.Errorf("%s: bucket %q has its root at page %d, outside 2..%d", where, name, root, c.hwm-1)
				}
			} else if root != 0 {
				if err := c.tree(root, depth+1, where+"/"+name); err != nil {
					return nil, err
				}
			} else if len(v) < 16+pageHeader || le.Uint16(v[16+8:]) != flagLeaf || le.Uint64(v[16:]) != 0 || le.Uint32(v[16+12:]) != 0 {
				// An inline bucket is one leaf page inside the value, of
				// id 0 and no overflow (bbolt frees the page a node was
				// read from when it writes the node again).
				return nil, fmt.Errorf("%s: inline bucket %q is not a leaf page of id 0", where, name)
			} else if _, err := c.node(v[16:], depth+1, where+"/"+name, id, nil, nil); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("%s: page %d has type %#x where a branch or leaf belongs", where, id, flags)
		}
	}
	return largest, nil
}
