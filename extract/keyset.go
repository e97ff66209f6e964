package extract

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"math"
	"math/bits"
	"os"
	"strings"
)

// keySet remembers the row keys a read has seen, and where, by a 64-bit
// hash of each rather than the key itself. Each read has its own seed.
// Two different keys collide with a probability of about n²/2⁶⁵ (10⁻⁶
// for 5 M keys); a collision is taken for a duplicate, a paging fault, so
// the object is read again, with a new seed: it costs a re-read, never a
// row.
//
// Up to memKeys keys it is a map (38 bytes of heap a key, measured by
// BenchmarkKeySet). Past that the set spills: every key's hash and
// position go to a file (12 bytes a key, made by WithSpillFiles'
// function, unlinked as soon as it is created where the system allows),
// and memory keeps only a Bloom filter of the hashes, 2 to 4 bytes a key
// as it doubles (2.2 at 2 M keys; it fills twice as fast as the map), so
// that a merge stream of tens of millions of rows does not hold a
// gigabyte for its keys (issue 14: at 5 M keys the map and the heap
// growth it caused were 300 MB of a 499 MB peak). A key the filter may
// have seen is a suspect; the suspects are checked against the file, in
// one sequential pass, when maxSuspects of them wait and when the read
// ends (finish). A spilled set so reports a duplicate later than a map
// would, at the latest at the end of the read, which is then read again
// all the same. Not safe for concurrent use.
type keySet struct {
	seed    maphash.Seed
	m       map[uint64]int32
	memKeys int                      // keys the map holds before the set spills
	create  func() (*os.File, error) // the spill file; nil: tempFile

	// Once spilled, m is nil and these hold the keys.
	file     *os.File
	w        *bufio.Writer
	keys     int64 // records written
	filter   keyFilter
	capacity int64 // keys the filter is sized for; it doubles past that
	suspects []suspect
	waitMax  int   // suspects that wait before a pass: at least maxSuspects
	err      error // the spill file's first error, returned from then on
	// spillErr is why no spill file could be made: the keys stayed in
	// the map.
	spillErr error
}

// suspect is a key the filter says may have been read before (its
// positions are read from the file).
type suspect struct {
	h   uint64
	key string
}

// keyDup is a key read twice: at At, and first at Prev.
type keyDup struct {
	Key      string
	At, Prev int
}

const (
	// defaultMemKeys is how many keys a read keeps in a map before its
	// key set spills: about 10 MB.
	defaultMemKeys = 1 << 18
	// maxSuspects is how many suspects wait before a pass over the file
	// checks them. The filter's false positives, at most about two keys in
	// a thousand, make a pass every few million keys.
	maxSuspects = 4096
	// filterBits is the filter's size in bits per key it is sized for.
	filterBits = 16
	// spillRecord is the bytes of one key in the spill file: its hash and
	// position, little-endian.
	spillRecord = 12
)

func newKeySet(create func() (*os.File, error), memKeys int) *keySet {
	if memKeys < 1 {
		memKeys = defaultMemKeys
	}
	if create == nil {
		create = tempFile
	}
	return &keySet{seed: maphash.MakeSeed(), m: map[uint64]int32{}, memKeys: memKeys, create: create, waitMax: maxSuspects}
}

// newKeySet is a key set for one read, spilling as the client's options
// say.
func (c *Client) newKeySet() *keySet { return newKeySet(c.spillFile, c.keyMem) }

// endKeys releases a read's key set, and warns when its keys stayed in
// memory for want of a spill file; attrs name the read.
func (c *Client) endKeys(ctx context.Context, k *keySet, attrs ...any) {
	k.close()
	if k.spillErr != nil {
		c.log.WarnContext(ctx, "the read's keys stayed in memory", append(attrs, "err", k.spillErr)...)
	}
}

// tempFile is a new file in os.TempDir, unlinked at once. It is opened
// through an os.Root, which on Windows shares it for deletion, so that the
// unlink works there too (not on FAT volumes).
func tempFile() (*os.File, error) {
	r, err := os.OpenRoot(os.TempDir())
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var b [8]byte
	rand.Read(b[:])
	name := "sepipe-keys-" + hex.EncodeToString(b[:])
	f, err := r.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		_ = r.Remove(name)
	}
	return f, err
}

// add records key as read at at (a page number or an item offset). It
// returns the duplicate it found: key itself, read before, or, once the
// set spilled, any suspect a pass over the file confirmed. An error is
// the spill file's.
func (k *keySet) add(key string, at int) (d *keyDup, err error) {
	if k.err != nil {
		return nil, k.err
	}
	defer func() {
		if err != nil {
			k.err = err
		}
	}()
	h := maphash.String(k.seed, key)
	if k.m != nil {
		if p, dup := k.m[h]; dup {
			return &keyDup{Key: key, At: at, Prev: int(p)}, nil
		}
		k.m[h] = int32(at)
		if len(k.m) < k.memKeys {
			return nil, nil
		}
		if err := k.spill(); err != nil {
			// No file to be had (no space, no folder): the keys stay in
			// memory, as they did before sets spilled; the reader says so.
			k.spillErr, k.memKeys = err, math.MaxInt
		}
		return nil, nil
	}
	if k.filter.testAndSet(h) {
		// A copy: a page's keys may share one string (the decoder's),
		// which a suspect would keep whole; 4,096 of them, each of
		// another page, kept 40-60 MB at 5 M keys.
		k.suspects = append(k.suspects, suspect{h: h, key: strings.Clone(key)})
	}
	if err := k.write(h, at); err != nil {
		return nil, err
	}
	if k.keys > k.capacity {
		if err := k.grow(); err != nil {
			return nil, err
		}
	}
	// At least one suspect for every 1,024 keys written waits, so that
	// the passes over the file stay a few however long the read.
	if len(k.suspects) >= max(k.waitMax, int(k.keys/1024)) {
		return k.check()
	}
	return nil, nil
}

// finish checks the suspects still waiting: the read ended.
func (k *keySet) finish() (*keyDup, error) {
	if k.err != nil {
		return nil, k.err
	}
	if k.m != nil || len(k.suspects) == 0 {
		return nil, nil
	}
	return k.check()
}

// close releases the spill file.
func (k *keySet) close() {
	if k.file != nil {
		k.file.Close()
		k.file, k.w = nil, nil
	}
}

// spill moves the map's keys into a new spill file and filter; when it
// cannot, the map stays as it was.
func (k *keySet) spill() error {
	f, err := k.create()
	if err != nil {
		return fmt.Errorf("spill the read's %d keys: %w", len(k.m), err)
	}
	k.file = f
	k.w = bufio.NewWriterSize(f, 64<<10)
	k.capacity = 2 * int64(len(k.m))
	k.filter = newKeyFilter(k.capacity)
	for h, at := range k.m {
		k.filter.testAndSet(h)
		err = k.write(h, int(at))
		if err != nil {
			break
		}
	}
	if err == nil {
		err = k.w.Flush()
	}
	if err != nil {
		k.close()
		k.filter, k.keys, k.capacity = keyFilter{}, 0, 0
		return fmt.Errorf("spill the read's %d keys: %w", len(k.m), err)
	}
	k.m = nil
	return nil
}

func (k *keySet) write(h uint64, at int) error {
	var rec [spillRecord]byte
	binary.LittleEndian.PutUint64(rec[:8], h)
	binary.LittleEndian.PutUint32(rec[8:], uint32(int32(at)))
	if _, err := k.w.Write(rec[:]); err != nil {
		return fmt.Errorf("spill keys to %s: %w", k.file.Name(), err)
	}
	k.keys++
	return nil
}

// scan calls fn for every record of the spill file, in the order written.
func (k *keySet) scan(fn func(h uint64, at int32)) error {
	if err := k.w.Flush(); err != nil {
		return fmt.Errorf("spill keys to %s: %w", k.file.Name(), err)
	}
	buf := make([]byte, spillRecord*8192)
	var off int64
	for off < k.keys*spillRecord {
		n, err := k.file.ReadAt(buf, off)
		n -= n % spillRecord
		for i := 0; i < n; i += spillRecord {
			fn(binary.LittleEndian.Uint64(buf[i:]), int32(binary.LittleEndian.Uint32(buf[i+8:])))
		}
		off += int64(n)
		if err != nil && !(errors.Is(err, io.EOF) && off == k.keys*spillRecord) {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("read spilled keys back from %s at byte %d: %w", k.file.Name(), off, err)
		}
	}
	return nil
}

// grow doubles the filter, refilled from the file.
func (k *keySet) grow() error {
	k.capacity *= 2
	k.filter = keyFilter{} // the file has every hash: let the old one go first
	f := newKeyFilter(k.capacity)
	if err := k.scan(func(h uint64, _ int32) { f.testAndSet(h) }); err != nil {
		return err
	}
	k.filter = f
	return nil
}

// check looks the suspects up in the file and returns the first that was
// read twice.
func (k *keySet) check() (*keyDup, error) {
	type seen struct {
		n             int
		first, second int32
	}
	want := make(map[uint64]seen, len(k.suspects))
	for _, s := range k.suspects {
		want[s.h] = seen{}
	}
	err := k.scan(func(h uint64, at int32) {
		if s, ok := want[h]; ok {
			switch s.n {
			case 0:
				s.first = at
			case 1:
				s.second = at
			}
			s.n++
			want[h] = s
		}
	})
	if err != nil {
		return nil, err
	}
	suspects := k.suspects
	k.suspects = k.suspects[:0]
	for _, s := range suspects {
		// The suspect may be the key's first reading (the filter erred
		// then, and was right later): its second reading is the
		// duplicate.
		if w := want[s.h]; w.n > 1 {
			return &keyDup{Key: s.key, At: int(w.second), Prev: int(w.first)}, nil
		}
	}
	return nil, nil
}

// keyFilter is a blocked Bloom filter of key hashes: a hash sets
// filterProbes bits in one block of 512 bits, one cache line, so a key
// costs one memory access however large the filter. At filterBits bits a
// key, about two keys in a thousand it has not seen pass for seen when it
// is full (TestKeyFilterFalsePositives), fewer before.
type keyFilter struct {
	blocks [][8]uint64
}

const filterProbes = 8

func newKeyFilter(keys int64) keyFilter {
	return keyFilter{blocks: make([][8]uint64, max(keys*filterBits/512, 1))}
}

// testAndSet sets h's bits and reports whether all of them were set.
func (f keyFilter) testAndSet(h uint64) bool {
	i, _ := bits.Mul64(h, uint64(len(f.blocks)))
	b := &f.blocks[i]
	// The bits' positions come from the hash's low bits, which the
	// block's index (its high bits) does not use: positions drawn from
	// bits the index fixes would leave a large filter few patterns a
	// block (11.9 % false positives at 67 M keys, against 0.2 %). Double
	// hashing with an odd step gives distinct positions modulo 512.
	pos, step := h&511, (h>>9)|1
	all := true
	for range filterProbes {
		w, bit := pos>>6, uint64(1)<<(pos&63)
		all = all && b[w]&bit != 0
		b[w] |= bit
		pos = (pos + step) & 511
	}
	return all
}
