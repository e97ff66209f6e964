package extract

import "hash/maphash"

// keySet remembers the row keys a read has seen, and where, by a 128-bit
// hash of each (two maphash seeds) rather than the key itself: a merge
// stream of a million rows keeps 16 bytes a key instead of a string and
// its header, and spends no allocation per key. Two different keys
// collide with a probability of about n²/2¹²⁹ (10⁻²⁷ for a million), and
// a collision would end the read with a paging fault, never a lost row.
type keySet struct {
	s1, s2 maphash.Seed
	m      map[[2]uint64]int
}

func newKeySet() keySet {
	return keySet{s1: maphash.MakeSeed(), s2: maphash.MakeSeed(), m: map[[2]uint64]int{}}
}

// add records key as read at at; when it was read before it returns
// where, and true.
func (k keySet) add(key string, at int) (prev int, dup bool) {
	h := [2]uint64{maphash.String(k.s1, key), maphash.String(k.s2, key)}
	if prev, dup = k.m[h]; dup {
		return prev, true
	}
	k.m[h] = at
	return 0, false
}
