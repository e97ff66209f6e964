package dbtgen

import "testing"

func TestJinjaLiteral(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"Completion %":                    "Completion %",
		"{{ run_query('drop table x') }}": `{{ "{{" }} run_query('drop table x') }}`,
		"{% set x = 1 %}{# c #}":          `{{ "{%" }} set x = 1 %}{{ "{#" }} c #}`,
		"a { b } {{":                      `a { b } {{ "{{" }}`,
	} {
		if got := jinjaLiteral(in); got != want {
			t.Errorf("jinjaLiteral(%q) = %q, want %q", in, got, want)
		}
	}
}
