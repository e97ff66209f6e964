package colnames

import (
	"strconv"
	"strings"
)

// Unique returns names with each repeated name (compared without regard
// to case, as DuckDB compares identifiers) after its first renamed
// NAME_1, NAME_2, ...: the first free suffix, never a name the result
// already has. A name not repeated is kept as it is; names is not changed.
func Unique(names []string) []string {
	taken := make(map[string]bool, len(names))
	for _, n := range names {
		taken[strings.ToLower(n)] = true
	}
	seen := make(map[string]bool, len(names))
	next := map[string]int{}
	out := make([]string, len(names))
	for i, n := range names {
		key := strings.ToLower(n)
		if !seen[key] {
			seen[key] = true
			out[i] = n
			continue
		}
		for {
			next[key]++
			c := n + "_" + strconv.Itoa(next[key])
			// taken holds every name given, so no later name is c: only
			// the next suffixes must not take it again.
			if lc := strings.ToLower(c); !taken[lc] {
				taken[lc] = true
				out[i] = c
				break
			}
		}
	}
	return out
}
