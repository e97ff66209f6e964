package colnames_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/sepipe/sepipe/internal/colnames"
)

func ExampleUnique() {
	fmt.Println(colnames.Unique([]string{"userId", "status", "courseId", "status", "title", "Status"}))
	// Output: [userId status courseId status_1 title Status_2]
}

func TestUnique(t *testing.T) {
	for _, tc := range []struct{ in, want []string }{
		{nil, []string{}},
		{[]string{"a", "b"}, []string{"a", "b"}},
		{[]string{"a", "a", "a"}, []string{"a", "a_1", "a_2"}},
		// a_1 is the result's own: the renamed a takes the next free name.
		{[]string{"a", "a", "a_1"}, []string{"a", "a_2", "a_1"}},
		{[]string{"a_1", "a", "a"}, []string{"a_1", "a", "a_2"}},
		{[]string{"", ""}, []string{"", "_1"}},
	} {
		got := colnames.Unique(tc.in)
		if !slices.Equal(got, tc.want) {
			t.Errorf("Unique(%q) = %q, want %q", tc.in, got, tc.want)
		}
		seen := map[string]bool{}
		for _, n := range got {
			if seen[n] {
				t.Errorf("Unique(%q) = %q repeats %q", tc.in, got, n)
			}
			seen[n] = true
		}
	}
}
