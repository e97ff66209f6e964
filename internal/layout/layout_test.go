package layout_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/sepipe/sepipe"

// allowed lists, for every package of the module, the packages of the
// module its non-test code may import. DEVELOPERS.md's picture is this
// table; change both together.
var allowed = map[string][]string{
	"service":                nil, // the leaf: the service's vocabulary
	"extract/servicetest":    nil, // the fake shares nothing with the client
	"extract":                {"internal/flock", "service"},
	"schemas":                {"lakefile", "service"},
	"lakefile":               nil, // the lake files' format and sepipe's own columns; arrow-go only
	"transform":              {"lakefile", "schemas", "service"},
	"load":                   {"internal/faults", "internal/flock", "lakefile", "schemas", "service", "transform"},
	"pipeline":               {"extract", "internal/cpuidle", "internal/faults", "internal/flock", "lakehouse", "load", "schemas", "service", "transform"},
	"dashboard":              {"internal/colnames", "load", "query"},
	"query":                  {"load"},     // the read side for people: sandboxed SQL, values as text
	"lakehouse":              {"lakefile"}, // Iceberg tables through iceberg-go; takes Arrow, knows no stage
	"internal/bench":         {"extract", "extract/servicetest", "internal/demo", "load", "pipeline", "service"},
	"internal/demo":          {"extract", "extract/servicetest", "pipeline", "webhooks"},
	"internal/dbtgen":        {"extract", "load", "pipeline", "schemas", "service"},
	"internal/layout":        nil,
	"internal/colnames":      nil,                                                      // unique names for a query result's columns
	"internal/cpuidle":       nil,                                                      // whether the processors were mostly idle lately (the early load)
	"internal/faults":        nil,                                                      // the run protocol\'s crash points and the tests\' hook
	"internal/flock":         nil,                                                      // the output folder\'s advisory locks
	"internal/webhooktest":   {"service", "webhooks"},                                  // tests only: deliver signed events to a listener
	"internal/warehousetest": {"load"},                                                 // tests only: open the published warehouse as a reader does
	"internal/longtest":      nil,                                                      // tests only: the long tests' switch (SEPIPE_LONG_TESTS)
	"internal/lakeservers":   nil,                                                      // tests only: versitygw and PostgreSQL on 127.0.0.1
	"internal/promserver":    nil,                                                      // tests only: Debian's prometheus on 127.0.0.1
	"internal/monitor":       {"extract", "load", "pipeline", "webhooks"},              // Prometheus metrics, probes, textfile and Pushgateway
	"webhooks":               {"internal/faults", "internal/flock", "load", "service"}, // receiver, spool, listen loop
	"cmd/sepipe":             {"*"},
}

// importers of the fake service outside tests: the commands that serve it.
var fakeImporters = []string{"cmd/sepipe", "internal/bench", "internal/demo"}

func TestImportGraph(t *testing.T) {
	got := imports(t)
	for pkg, deps := range got {
		want, ok := allowed[pkg]
		if !ok {
			t.Errorf("package %s is not in the layout table (internal/layout/layout_test.go): add it with the imports it may have, and to DEVELOPERS.md", pkg)
			continue
		}
		for _, d := range deps {
			if d == "extract/servicetest" && !slices.Contains(fakeImporters, pkg) {
				t.Errorf("%s imports the fake service (extract/servicetest): only %v may", pkg, fakeImporters)
			}
			if !slices.Contains(want, "*") && !slices.Contains(want, d) {
				t.Errorf("%s imports %s: not allowed by the layout (may import %v)", pkg, d, want)
			}
		}
	}
	for pkg := range allowed {
		if _, ok := got[pkg]; !ok {
			t.Errorf("the layout table lists %s, which does not exist: remove it", pkg)
		}
	}
}

// TestNoHTTPClientBelowExtract: the schemas and the decoder reach no
// package of the client, directly or not.
func TestNoHTTPClientBelowExtract(t *testing.T) {
	for _, pkg := range []string{"service", "schemas", "transform"} {
		out := goList(t, "-deps", "-f", "{{.ImportPath}}", module+"/"+pkg)
		for _, d := range strings.Fields(out) {
			if d == module+"/extract" || strings.HasPrefix(d, module+"/extract/") {
				t.Errorf("%s depends on %s", pkg, d)
			}
		}
	}
}

// TestDocSaysWhatThePackageImports: every package has a doc.go, whose
// package comment ends by saying which packages of sepipe's it imports
// ("// Imports of sepipe's: a, b." or "// Imports nothing of sepipe's."),
// and says it truly: a doc.go that no longer told what its package held
// was found by review (issue 41).
func TestDocSaysWhatThePackageImports(t *testing.T) {
	root := strings.TrimSpace(goList(t, "-m", "-f", "{{.Dir}}"))
	for pkg, deps := range imports(t) {
		if pkg == "" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, pkg, "doc.go"))
		if err != nil {
			t.Errorf("package %s has no doc.go: %v", pkg, err)
			continue
		}
		var said string
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "// Imports ") {
				said = line
			}
		}
		want := "// Imports nothing of sepipe's."
		switch {
		case pkg == "cmd/sepipe":
			want = "// Imports of sepipe's: any package (it is the command)."
		case len(deps) > 0:
			want = "// Imports of sepipe's: " + strings.Join(deps, ", ") + "."
		}
		if said != want {
			t.Errorf("%s/doc.go says %q; its imports say %q", pkg, said, want)
		}
	}
}

// imports maps each package of the module (relative path) to the module
// packages its non-test files import.
func imports(t *testing.T) map[string][]string {
	out := goList(t, "-f", `{{.ImportPath}}|{{join .Imports ","}}`, module+"/...")
	m := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		pkg, deps, _ := strings.Cut(line, "|")
		rel := strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/")
		var ours []string
		for _, d := range strings.Split(deps, ",") {
			if r, ok := strings.CutPrefix(d, module+"/"); ok {
				ours = append(ours, r)
			}
		}
		sort.Strings(ours)
		m[rel] = ours
	}
	return m
}

func goList(t *testing.T, args ...string) string {
	t.Helper()
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := exec.LookPath(gobin); err != nil {
		gobin = "go"
	}
	cmd := exec.Command(gobin, append([]string{"list"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v\n%s", args, err, stderr.String())
	}
	return string(out)
}
