package extract

import "hash/maphash"

// keySet remembers the row keys a read has seen, and where, by a 64-bit
// hash of each rather than the key itself: a merge stream of 5 M rows
// keeps about 70 MB for it instead of some 400 MB of strings and map
// entries, and spends no allocation per key. Each read has its own seed.
// Two different keys collide with a probability of about n²/2⁶⁵ (10⁻⁶
// for 5 M keys); a collision is taken for a duplicate, a paging fault, so
// the object is read again, with a new seed: it costs a re-read, never a
// row.
type keySet struct {
	seed maphash.Seed
	m    map[uint64]int32
}

func newKeySet() keySet {
	return keySet{seed: maphash.MakeSeed(), m: map[uint64]int32{}}
}

// add records key as read at at (a page number or an item offset); when it
// was read before it returns where, and true.
func (k keySet) add(key string, at int) (prev int, dup bool) {
	h := maphash.String(k.seed, key)
	if p, dup := k.m[h]; dup {
		return int(p), true
	}
	k.m[h] = int32(at)
	return 0, false
}
