package server

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
)

// checkBoltFile checks the structure of the bbolt file at path without
// bbolt: the newest valid meta page, every page of the tree it roots
// (branch and leaf pages, nested and inline buckets) and the freelist.
// Every page must lie below the high-water mark and inside the file, be
// referenced once, carry its own id and a branch or leaf type, and hold its
// elements inside itself; free pages must be none of those. It reads the
// file into memory once (meta.db holds definitions only). A missing file is
// no damage: bbolt creates it.
func checkBoltFile(path string) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	meta, err := newestBoltMeta(b)
	if err != nil {
		return err
	}
	c := &boltChecker{file: b, page: int(meta.pageSize), hwm: meta.hwm, seen: make(map[uint64]bool)}
	if err := c.pageTree(meta.root, 0); err != nil {
		return fmt.Errorf("the file is damaged: %w", err)
	}
	if meta.freelist != boltNoFreelist {
		if err := c.freelist(meta.freelist); err != nil {
			return fmt.Errorf("the file is damaged: %w", err)
		}
	}
	return nil
}

const (
	boltMagic        = 0xED0CDAED
	boltVersion      = 2
	boltHeader       = 16 // page header: id u64, flags u16, count u16, overflow u32
	boltElement      = 16 // branch: pos, ksize u32, pgid u64; leaf: flags, pos, ksize, vsize u32
	boltBranch       = 0x01
	boltLeaf         = 0x02
	boltFreelistPage = 0x10
	boltBucketLeaf   = 0x01
	boltNoFreelist   = ^uint64(0)
	boltMaxDepth     = 64
)

type boltMeta struct {
	pageSize       uint32
	root, freelist uint64
	hwm, txid      uint64
}

// newestBoltMeta returns the valid meta page with the highest transaction
// id, as bbolt picks it (one torn meta page is how bbolt survives a crash).
// The second meta page sits one page in: at the first one's page size, or,
// when the first is damaged, at the sizes bbolt would try.
func newestBoltMeta(b []byte) (boltMeta, error) {
	best, found := parseBoltMeta(b, 0)
	sizes := []int{os.Getpagesize(), 4096}
	if found {
		sizes = []int{int(best.pageSize)}
	}
	for _, size := range sizes {
		if m, ok := parseBoltMeta(b, size); ok && int(m.pageSize) == size && (!found || m.txid > best.txid) {
			best, found = m, true
		}
	}
	if !found {
		return boltMeta{}, errors.New("the file is not a bbolt database, or both its meta pages are damaged")
	}
	return best, nil
}

func parseBoltMeta(b []byte, off int) (boltMeta, bool) {
	m := off + boltHeader
	if off < 0 || m+64 > len(b) {
		return boltMeta{}, false
	}
	le := binary.LittleEndian
	h := fnv.New64a()
	h.Write(b[m : m+56])
	if le.Uint32(b[m:]) != boltMagic || le.Uint32(b[m+4:]) != boltVersion || le.Uint64(b[m+56:]) != h.Sum64() {
		return boltMeta{}, false
	}
	meta := boltMeta{pageSize: le.Uint32(b[m+8:]), root: le.Uint64(b[m+16:]), freelist: le.Uint64(b[m+32:]),
		hwm: le.Uint64(b[m+40:]), txid: le.Uint64(b[m+48:])}
	if meta.pageSize < 512 || meta.pageSize > 1<<20 {
		return boltMeta{}, false
	}
	return meta, true
}

// boltChecker walks one bbolt file's pages.
type boltChecker struct {
	file []byte
	page int
	hwm  uint64
	seen map[uint64]bool // pages reached so far
}

// span returns the bytes of page id and its overflow pages, marking them
// reached.
func (c *boltChecker) span(id uint64, flags uint16) ([]byte, error) {
	if id < 2 || id >= c.hwm || (id+1)*uint64(c.page) > uint64(len(c.file)) {
		return nil, fmt.Errorf("page %d: out of bounds (high-water mark %d)", id, c.hwm)
	}
	p := c.file[id*uint64(c.page):]
	le := binary.LittleEndian
	over := uint64(le.Uint32(p[12:]))
	if le.Uint64(p) != id {
		return nil, fmt.Errorf("page %d: header says page %d", id, le.Uint64(p))
	}
	if f := le.Uint16(p[8:]); f != flags && (flags != boltBranch|boltLeaf || f != boltBranch && f != boltLeaf) {
		return nil, fmt.Errorf("page %d: type %#x where %#x belongs", id, f, flags)
	}
	if id+over >= c.hwm || (id+over+1)*uint64(c.page) > uint64(len(c.file)) {
		return nil, fmt.Errorf("page %d: %d overflow pages run past the end", id, over)
	}
	for i := id; i <= id+over; i++ {
		if c.seen[i] {
			return nil, fmt.Errorf("page %d: referenced twice", i)
		}
		c.seen[i] = true
	}
	return p[:(over+1)*uint64(c.page)], nil
}

// pageTree checks the branch or leaf page id and everything below it.
func (c *boltChecker) pageTree(id uint64, depth int) error {
	if depth > boltMaxDepth {
		return fmt.Errorf("page %d: tree deeper than %d", id, boltMaxDepth)
	}
	p, err := c.span(id, boltBranch|boltLeaf)
	if err != nil {
		return err
	}
	return c.elements(id, p, depth)
}

// elements checks the elements of page p (a page, or an inline bucket's
// page inside a value) and descends into children and buckets.
func (c *boltChecker) elements(id uint64, p []byte, depth int) error {
	le := binary.LittleEndian
	flags, count := le.Uint16(p[8:]), int(le.Uint16(p[10:]))
	if flags != boltBranch && flags != boltLeaf {
		return fmt.Errorf("page %d: type %#x is neither branch nor leaf", id, flags)
	}
	if boltHeader+count*boltElement > len(p) {
		return fmt.Errorf("page %d: %d elements do not fit", id, count)
	}
	for i := range count {
		e := boltHeader + i*boltElement
		if flags == boltBranch {
			if _, err := within(p, e, le.Uint32(p[e:]), le.Uint32(p[e+4:]), id); err != nil {
				return err
			}
			if err := c.pageTree(le.Uint64(p[e+8:]), depth+1); err != nil {
				return err
			}
			continue
		}
		val, err := within(p, e, le.Uint32(p[e+4:]), le.Uint32(p[e+8:])+le.Uint32(p[e+12:]), id)
		if err != nil {
			return err
		}
		if le.Uint32(p[e:])&boltBucketLeaf == 0 {
			continue
		}
		val = val[le.Uint32(p[e+8:]):] // the bucket header after the key
		if err := c.bucket(id, val, depth); err != nil {
			return err
		}
	}
	return nil
}

// bucket checks a bucket's header and its pages: a root page, or the
// inline page that follows the header.
func (c *boltChecker) bucket(id uint64, val []byte, depth int) error {
	if len(val) < 16 {
		return fmt.Errorf("page %d: bucket header cut short", id)
	}
	if root := binary.LittleEndian.Uint64(val); root != 0 {
		return c.pageTree(root, depth+1)
	}
	inline := val[16:]
	if len(inline) < boltHeader {
		return fmt.Errorf("page %d: inline bucket cut short", id)
	}
	return c.elements(id, inline, depth+1)
}

// within returns p[e+pos : e+pos+n], or an error if that is not inside p.
func within(p []byte, e int, pos, n uint32, id uint64) ([]byte, error) {
	start, end := uint64(e)+uint64(pos), uint64(e)+uint64(pos)+uint64(n)
	if end > uint64(len(p)) {
		return nil, fmt.Errorf("page %d: an element points past the page", id)
	}
	return p[start:end], nil
}

// freelist checks the freelist page and that no free page is in use.
func (c *boltChecker) freelist(id uint64) error {
	p, err := c.span(id, boltFreelistPage)
	if err != nil {
		return err
	}
	le := binary.LittleEndian
	idx, count := uint64(0), uint64(le.Uint16(p[10:]))
	if count == 0xFFFF {
		idx, count = 1, le.Uint64(p[boltHeader:])
	}
	if count > uint64(len(p)-boltHeader)/8-idx {
		return fmt.Errorf("page %d: %d free page ids do not fit", id, count)
	}
	free := make(map[uint64]bool, count)
	for i := range count {
		f := le.Uint64(p[boltHeader+8*(idx+i):])
		switch {
		case f < 2 || f >= c.hwm:
			return fmt.Errorf("freelist: page %d out of bounds", f)
		case c.seen[f]:
			return fmt.Errorf("freelist: page %d is free and in use", f)
		case free[f]:
			return fmt.Errorf("freelist: page %d freed twice", f)
		}
		free[f] = true
	}
	return nil
}
