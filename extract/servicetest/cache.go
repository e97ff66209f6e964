package servicetest

import (
	"slices"
	"sync"
)

// indexCache is a small LRU of row index lists keyed by (object, filters,
// sort, clock), so that reading a filtered or sorted object page by page
// scans it once. Concurrent requests for a key being built wait for it.
type indexCache struct {
	mu      sync.Mutex
	max     int
	entries []*cacheEntry // least recently used first
	builds  int           // number of scans, for tests
}

type cacheEntry struct {
	key  string
	done chan struct{}
	rows []int32
}

func newIndexCache(max int) *indexCache { return &indexCache{max: max} }

// get returns the rows cached under key, building them with build on a miss.
func (c *indexCache) get(key string, build func() []int32) []int32 {
	c.mu.Lock()
	for i, e := range c.entries {
		if e.key == key {
			copy(c.entries[i:], c.entries[i+1:])
			c.entries[len(c.entries)-1] = e
			c.mu.Unlock()
			<-e.done
			return e.rows
		}
	}
	e := &cacheEntry{key: key, done: make(chan struct{})}
	c.entries = append(c.entries, e)
	if len(c.entries) > c.max {
		c.entries[0] = nil
		c.entries = c.entries[1:]
	}
	c.builds++
	c.mu.Unlock()
	built := false
	defer func() {
		if !built { // build panicked: do not keep a half-built entry
			c.mu.Lock()
			if i := slices.Index(c.entries, e); i >= 0 {
				c.entries = slices.Delete(c.entries, i, i+1)
			}
			c.mu.Unlock()
		}
		close(e.done)
	}()
	e.rows = build()
	built = true
	return e.rows
}

// scans returns how many times get had to build.
func (c *indexCache) scans() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.builds
}
