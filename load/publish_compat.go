package load

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// metadataChainsResolve checks a closed, checkpointed DuckDB file for what
// DuckDB before 1.4.2 cannot read: a metadata block in use whose chain's
// next pointer names a block that is no metadata block. DuckDB 1.4 and
// later, reusing an unchanged row group's metadata at a checkpoint, keep
// the block its columns start in but free the rest of the chain it was
// written in (a newer reader never follows that pointer past the data it
// needs); DuckDB 1.1 resolves the next pointer whenever it reads a block
// and fails: "Failed to load metadata pointer". The working database is
// checkpointed without that reuse (experimental_metadata_reuse=false), so
// this only finds a state written before; the publish rewrites that one.
//
// It reads the active header, the free list (with the metadata manager's
// list of blocks) and the first 8 bytes of every metadata sub-block in
// use: a few hundred KB whatever the file's size. Anything it cannot parse
// is an error, which the caller treats like a dangling pointer.
func metadataChainsResolve(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	const headerSize = 4096
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	// The main header: a checksum, "DUCK", the storage version number. A
	// byte copy keeps it, and DuckDB 1.1 reads version 64 only (a file of
	// a newer version is written anew, in StorageVersion's).
	var mainHeader [20]byte
	if _, err := f.ReadAt(mainHeader[:], 0); err != nil {
		return fmt.Errorf("main header: %w", err)
	}
	if string(mainHeader[8:12]) != "DUCK" {
		return ErrNotDuckDB
	}
	if v := binary.LittleEndian.Uint64(mainHeader[12:]); v != 64 {
		return fmt.Errorf("storage version number %d; DuckDB 1.1 reads 64", v)
	}
	var h [2][7]uint64
	for i := range h {
		var b [8 + 7*8]byte
		if _, err := f.ReadAt(b[:], int64(headerSize*(i+1))); err != nil {
			return fmt.Errorf("database header: %w", err)
		}
		for j := range h[i] {
			h[i][j] = binary.LittleEndian.Uint64(b[8+8*j:])
		}
	}
	hd := h[0]
	if h[1][0] > h[0][0] { // the higher iteration is the active header
		hd = h[1]
	}
	freeList, blockCount, allocSize := hd[2], hd[3], hd[4]
	if freeList == ^uint64(0) {
		return errors.New("no free list: cannot tell which blocks hold metadata")
	}
	if allocSize < 64*1024 || allocSize > 1<<30 || allocSize%4096 != 0 {
		return fmt.Errorf("block size %d", allocSize)
	}
	sub := int64((allocSize - 8) / 64 / 8 * 8) // MetadataManager::GetMetadataBlockSize
	const blockStart = 3 * headerSize
	// What the checks below read is bounded by what the file holds (its
	// block count may be larger: free blocks at its end are cut off), so a
	// corrupt header or free list is an error, never an allocation or a
	// walk it names.
	subBlocks := uint64(max(fi.Size()-blockStart, 0)) / allocSize * 64
	const idMask = uint64(1)<<56 - 1
	read := func(ptr uint64) ([]byte, error) {
		id, idx := ptr&idMask, ptr>>56
		if id >= blockCount || idx >= 64 {
			return nil, fmt.Errorf("metadata pointer %d.%d outside the file's %d blocks", id, idx, blockCount)
		}
		b := make([]byte, sub)
		_, err := f.ReadAt(b, blockStart+int64(id)*int64(allocSize)+8+int64(idx)*sub)
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return b, err
	}
	// The free list's stream: free blocks, multi-use blocks, then the
	// metadata manager's blocks (id, bitmask of free sub-blocks).
	cur, err := read(freeList)
	if err != nil {
		return err
	}
	pos, hops := int64(8), 0
	next := func(n int64) ([]byte, error) {
		out := make([]byte, 0, n)
		for n > 0 {
			if pos == sub {
				nx := binary.LittleEndian.Uint64(cur)
				if nx == ^uint64(0) || uint64(hops) >= subBlocks {
					return nil, errors.New("free list ends early, or runs longer than the file")
				}
				hops++
				if cur, err = read(nx); err != nil {
					return nil, err
				}
				pos = 8
			}
			k := min(n, sub-pos)
			out = append(out, cur[pos:pos+k]...)
			pos += k
			n -= k
		}
		return out, nil
	}
	u64 := func() (uint64, error) {
		b, err := next(8)
		if err != nil {
			return 0, err
		}
		return binary.LittleEndian.Uint64(b), nil
	}
	// skip passes over n entries of each bytes, a sub-block at a time.
	skip := func(n uint64, each int64) error {
		if n > subBlocks*uint64(sub)/uint64(each) {
			return fmt.Errorf("free list names %d entries, more than the file holds", n)
		}
		for left := int64(n) * each; left > 0; left -= sub {
			if _, err := next(min(left, sub)); err != nil {
				return err
			}
		}
		return nil
	}
	count := func(each int64) (uint64, error) {
		n, err := u64()
		if err == nil && n > blockCount {
			err = fmt.Errorf("free list names %d blocks of %d", n, blockCount)
		}
		if err == nil {
			err = skip(n, each)
		}
		return n, err
	}
	if _, err := count(8); err != nil { // free blocks
		return err
	}
	if _, err := count(12); err != nil { // multi-use blocks: id, uint32 count
		return err
	}
	n, err := u64()
	if err != nil {
		return err
	}
	if n > blockCount {
		return fmt.Errorf("%d metadata blocks of %d", n, blockCount)
	}
	type mblock struct{ id, free uint64 }
	var blocks []mblock // grown as read: n may be corrupt
	isMeta := map[uint64]bool{}
	for range n {
		var b mblock
		if b.id, err = u64(); err == nil {
			b.free, err = u64()
		}
		if err != nil {
			return err
		}
		blocks = append(blocks, b)
		isMeta[b.id] = true
	}
	for _, b := range blocks {
		for idx := uint64(0); idx < 64; idx++ {
			if b.free&(1<<idx) != 0 {
				continue
			}
			s, err := read(b.id | idx<<56)
			if err != nil {
				return err
			}
			if nx := binary.LittleEndian.Uint64(s); nx != ^uint64(0) && !isMeta[nx&idMask] {
				return fmt.Errorf("metadata block %d.%d continues in block %d, which holds no metadata (DuckDB before 1.4.2 cannot read the file)", b.id, idx, nx&idMask)
			}
		}
	}
	return nil
}
