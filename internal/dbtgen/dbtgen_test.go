package dbtgen_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/extract/servicetest"
	"github.com/sepipe/sepipe/internal/dbtgen"
	"github.com/sepipe/sepipe/internal/demo"
	"github.com/sepipe/sepipe/load"
	"github.com/sepipe/sepipe/pipeline"
	"github.com/sepipe/sepipe/service"
)

// The dbt project in ../../dbt is checked here the way 'dbt build' would run
// it, since dbt itself cannot be installed on the build machines: the test
// parses dbt_project.yml, profiles.yml, the models and their yml files,
// resolves the only Jinja the project may use (ref, source, config, and
// {# comments #}), runs every model in dependency order as CREATE OR
// REPLACE VIEW/TABLE in a fresh demo warehouse, and runs every schema test
// (unique, not_null, accepted_values, relationships) as dbt compiles it.

const dbtDir = "../../dbt"

// dbtProject is what the test reads of the dbt project.
type dbtProject struct {
	name     string
	schema   string            // target schema of the models (profiles.yml)
	folders  map[string]string // models/ sub folder -> materialization
	models   map[string]*dbtModel
	sources  map[string]dbtSourceTable // "source.table"
	tests    []dbtSchemaTest
	docs     map[string]string // model -> description
	ymlFiles []string
}

type dbtModel struct {
	name         string
	path         string // relative to models/
	raw          string
	compiled     string
	materialized string
	refs         []string
	sources      []string // "source.table"
}

type dbtSourceTable struct {
	database   string // the attached catalog ("" for the file dbt writes)
	schema     string
	identifier string
	quote      bool
}

// dbtSchemaTest is one generic test on a model or source column (column
// is an expression for table-level tests with column_name).
type dbtSchemaTest struct {
	kind     string // unique, not_null, accepted_values, relationships
	on       string // "model" or "source.table"
	isSource bool
	column   string
	values   []string // accepted_values
	to       string   // relationships: ref('x') or source('a', 'b')
	field    string   // relationships
	file     string
}

func (t dbtSchemaTest) String() string {
	s := fmt.Sprintf("%s(%s.%s)", t.kind, t.on, t.column)
	if t.kind == "relationships" {
		s += " -> " + t.to + "." + t.field
	}
	return s
}

// YAML shapes read from the project's files.
type dbtYAMLColumn struct {
	Name      string `yaml:"name"`
	Tests     []any  `yaml:"tests"`
	DataTests []any  `yaml:"data_tests"`
}

type dbtYAMLNode struct {
	Name          string          `yaml:"name"`
	Identifier    string          `yaml:"identifier"`
	LoadedAtField string          `yaml:"loaded_at_field"`
	Freshness     map[string]any  `yaml:"freshness"`
	Description   string          `yaml:"description"`
	Tests         []any           `yaml:"tests"`
	DataTests     []any           `yaml:"data_tests"`
	Columns       []dbtYAMLColumn `yaml:"columns"`
}

type dbtYAMLSource struct {
	Name      string          `yaml:"name"`
	Freshness map[string]any  `yaml:"freshness"`
	Database  string          `yaml:"database"`
	Schema    string          `yaml:"schema"`
	Quoting   map[string]bool `yaml:"quoting"`
	Tables    []dbtYAMLNode   `yaml:"tables"`
}

type dbtYAMLFile struct {
	Models  []dbtYAMLNode   `yaml:"models"`
	Sources []dbtYAMLSource `yaml:"sources"`
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

var (
	dbtJinja     = regexp.MustCompile(`(?s)\{\{(.*?)\}\}`)
	dbtComment   = regexp.MustCompile(`(?s)\{#.*?#\}`)
	dbtRefCall   = regexp.MustCompile(`^ref\(\s*['"]([^'"]+)['"]\s*\)$`)
	dbtSrcCall   = regexp.MustCompile(`^source\(\s*['"]([^'"]+)['"]\s*,\s*['"]([^'"]+)['"]\s*\)$`)
	dbtConfig    = regexp.MustCompile(`(?s)^config\((.*)\)$`)
	dbtMatConfig = regexp.MustCompile(`materialized\s*=\s*['"](\w+)['"]`)
)

// loadDBTProject reads the project in dir and compiles its models; the
// test stops when it cannot (each fault reported first).
func loadDBTProject(t *testing.T, dir string) *dbtProject {
	t.Helper()
	var proj struct {
		Name       string         `yaml:"name"`
		Profile    string         `yaml:"profile"`
		ModelPaths []string       `yaml:"model-paths"`
		Models     map[string]any `yaml:"models"`
	}
	readYAML(t, filepath.Join(dir, "dbt_project.yml"), &proj)
	if proj.Name == "" || proj.Profile == "" {
		t.Fatalf("dbt_project.yml: name and profile are required")
	}
	if len(proj.ModelPaths) != 1 {
		t.Fatalf("dbt_project.yml: want one model path, got %v", proj.ModelPaths)
	}
	var profiles map[string]struct {
		Target  string `yaml:"target"`
		Outputs map[string]struct {
			Type   string `yaml:"type"`
			Path   string `yaml:"path"`
			Schema string `yaml:"schema"`
			Attach []struct {
				Path     string `yaml:"path"`
				Alias    string `yaml:"alias"`
				ReadOnly bool   `yaml:"read_only"`
			} `yaml:"attach"`
		} `yaml:"outputs"`
	}
	readYAML(t, filepath.Join(dir, "profiles.yml"), &profiles)
	prof, ok := profiles[proj.Profile]
	if !ok {
		t.Fatalf("profiles.yml has no profile %q", proj.Profile)
	}
	out, ok := prof.Outputs[prof.Target]
	if !ok || out.Type != "duckdb" || out.Schema == "" {
		t.Fatalf("profiles.yml: target %q must be a duckdb output with a schema, got %+v", prof.Target, out)
	}
	// dbt writes a file of its own and reads the published warehouse
	// attached read-only: a sync never waits for dbt, nor dbt for a sync.
	if !strings.Contains(out.Path, "env_var(") || !strings.HasSuffix(out.Path, "dbt.duckdb") {
		t.Errorf("profiles.yml: path %q should be dbt.duckdb in the output folder, with an env_var override", out.Path)
	}
	if len(out.Attach) != 1 || out.Attach[0].Alias != dbtgen.WarehouseAlias || !out.Attach[0].ReadOnly ||
		!strings.HasSuffix(out.Attach[0].Path, "/warehouse.duckdb") || !strings.Contains(out.Attach[0].Path, "env_var(") {
		t.Errorf("profiles.yml: want one attach of the published warehouse.duckdb, alias %q, read_only: true; got %+v", dbtgen.WarehouseAlias, out.Attach)
	}
	p := &dbtProject{name: proj.Name, schema: out.Schema, folders: map[string]string{},
		models: map[string]*dbtModel{}, sources: map[string]dbtSourceTable{}, docs: map[string]string{}}
	// Folder materializations: models: <project>: <folder>: ... +materialized.
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			if k == "+materialized" || k == "materialized" {
				p.folders[prefix] = fmt.Sprint(v)
				continue
			}
			if sub, ok := v.(map[string]any); ok && !strings.HasPrefix(k, "+") {
				walk(dbtJoin(prefix, k), sub)
			}
		}
	}
	if m, ok := proj.Models[proj.Name].(map[string]any); ok {
		walk("", m)
	}
	root := filepath.Join(dir, proj.ModelPaths[0])
	err := filepath.WalkDir(root, func(file string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, file)
		rel = filepath.ToSlash(rel)
		switch filepath.Ext(file) {
		case ".sql":
			b, err := os.ReadFile(file)
			if err != nil {
				return err
			}
			name := strings.TrimSuffix(filepath.Base(file), ".sql")
			if _, dup := p.models[name]; dup {
				t.Errorf("model %s defined twice", name)
			}
			p.models[name] = &dbtModel{name: name, path: rel, raw: string(b)}
		case ".yml", ".yaml":
			p.ymlFiles = append(p.ymlFiles, rel)
			var f dbtYAMLFile
			readYAML(t, file, &f)
			for _, s := range f.Sources {
				for _, tb := range s.Tables {
					key := s.Name + "." + tb.Name
					st := dbtSourceTable{database: s.Database, schema: s.Schema, identifier: tb.Identifier, quote: s.Quoting["identifier"]}
					if st.schema == "" {
						st.schema = s.Name
					}
					if st.identifier == "" {
						st.identifier = tb.Name
					}
					p.sources[key] = st
					p.tests = append(p.tests, nodeTests(t, rel, key, true, tb)...)
				}
			}
			for _, m := range f.Models {
				p.docs[m.Name] = m.Description
				p.tests = append(p.tests, nodeTests(t, rel, m.Name, false, m)...)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range p.models {
		p.compile(t, m)
	}
	if t.Failed() {
		t.FailNow()
	}
	return p
}

func dbtJoin(prefix, k string) string {
	if prefix == "" {
		return k
	}
	return prefix + "/" + k
}

// nodeTests lists the generic tests of a model or source table.
func nodeTests(t *testing.T, file, on string, isSource bool, n dbtYAMLNode) []dbtSchemaTest {
	var out []dbtSchemaTest
	for _, raw := range append(n.Tests, n.DataTests...) {
		out = append(out, parseTest(t, file, on, isSource, "", raw))
	}
	for _, c := range n.Columns {
		for _, raw := range append(c.Tests, c.DataTests...) {
			out = append(out, parseTest(t, file, on, isSource, c.Name, raw))
		}
	}
	return out
}

func parseTest(t *testing.T, file, on string, isSource bool, column string, raw any) dbtSchemaTest {
	st := dbtSchemaTest{on: on, isSource: isSource, column: column, file: file}
	var args map[string]any
	switch v := raw.(type) {
	case string:
		st.kind = v
	case map[string]any:
		if len(v) != 1 {
			t.Fatalf("%s: %s: a test is one key, got %v", file, on, v)
		}
		for k, a := range v {
			st.kind = k
			args, _ = a.(map[string]any)
		}
	default:
		t.Fatalf("%s: %s: unreadable test %v", file, on, raw)
	}
	if nested, ok := args["arguments"].(map[string]any); ok { // dbt 1.10 style
		for k, v := range nested {
			args[k] = v
		}
	}
	if c, ok := args["column_name"].(string); ok {
		st.column = c
	}
	switch st.kind {
	case "unique", "not_null":
	case "accepted_values":
		vals, _ := args["values"].([]any)
		for _, v := range vals {
			st.values = append(st.values, fmt.Sprint(v))
		}
		if len(st.values) == 0 {
			t.Errorf("%s: %s: accepted_values without values", file, st)
		}
	case "relationships":
		st.to, _ = args["to"].(string)
		st.field, _ = args["field"].(string)
		if st.to == "" || st.field == "" {
			t.Errorf("%s: %s: relationships needs to and field", file, st)
		}
	default:
		t.Errorf("%s: %s: test %q is not a dbt built-in (the project may use no packages)", file, on, st.kind)
	}
	if st.column == "" {
		t.Errorf("%s: %s: %s test without a column", file, on, st.kind)
	}
	return st
}

// relation renders ref('x') or source('a', 'b') as dbt-duckdb would (the
// database part left out: it is the warehouse file itself).
func (p *dbtProject) relation(call string) (string, error) {
	call = strings.TrimSpace(call)
	if m := dbtRefCall.FindStringSubmatch(call); m != nil {
		if _, ok := p.models[m[1]]; !ok {
			return "", fmt.Errorf("ref to unknown model %q", m[1])
		}
		return fmt.Sprintf("%q.%q", p.schema, m[1]), nil
	}
	if m := dbtSrcCall.FindStringSubmatch(call); m != nil {
		s, ok := p.sources[m[1]+"."+m[2]]
		if !ok {
			return "", fmt.Errorf("source %s.%s is not declared in any sources yml", m[1], m[2])
		}
		db := ""
		if s.database != "" {
			db = fmt.Sprintf("%q.", s.database)
		}
		if s.quote {
			return fmt.Sprintf("%s%q.%q", db, s.schema, s.identifier), nil
		}
		return db + s.schema + "." + s.identifier, nil
	}
	return "", fmt.Errorf("unsupported Jinja {{ %s }}: only ref, source and config are resolved", call)
}

// compile resolves a model's Jinja.
func (p *dbtProject) compile(t *testing.T, m *dbtModel) {
	t.Helper()
	m.materialized = "view"
	for dir := filepath.ToSlash(filepath.Dir(m.path)); ; dir = filepath.ToSlash(filepath.Dir(dir)) {
		if mat, ok := p.folders[dir]; ok {
			m.materialized = mat
			break
		}
		if dir == "." || dir == "/" || dir == "" {
			if mat, ok := p.folders[""]; ok {
				m.materialized = mat
			}
			break
		}
	}
	sqlText := dbtComment.ReplaceAllString(m.raw, "")
	if strings.Contains(sqlText, "{%") {
		t.Errorf("model %s: {%% ... %%} blocks are not allowed (only ref, source, config)", m.name)
	}
	var errs []string
	m.compiled = dbtJinja.ReplaceAllStringFunc(sqlText, func(expr string) string {
		inner := strings.TrimSpace(dbtJinja.FindStringSubmatch(expr)[1])
		if c := dbtConfig.FindStringSubmatch(inner); c != nil {
			if mat := dbtMatConfig.FindStringSubmatch(c[1]); mat != nil {
				m.materialized = mat[1]
			}
			return ""
		}
		if r := dbtRefCall.FindStringSubmatch(inner); r != nil {
			m.refs = append(m.refs, r[1])
		} else if s := dbtSrcCall.FindStringSubmatch(inner); s != nil {
			m.sources = append(m.sources, s[1]+"."+s[2])
		}
		rel, err := p.relation(inner)
		if err != nil {
			errs = append(errs, err.Error())
			return expr
		}
		return rel
	})
	for _, e := range errs {
		t.Errorf("model %s: %s", m.name, e)
	}
	if m.materialized != "view" && m.materialized != "table" {
		t.Errorf("model %s: materialization %q (want view or table)", m.name, m.materialized)
	}
	if strings.HasSuffix(strings.TrimSpace(m.compiled), ";") {
		t.Errorf("model %s ends with ';' (dbt wraps the model in DDL)", m.name)
	}
}

// order returns the models in dependency order (refs first).
func (p *dbtProject) order(t *testing.T) []*dbtModel {
	t.Helper()
	var out []*dbtModel
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(name string, chain []string)
	visit = func(name string, chain []string) {
		switch state[name] {
		case 1:
			t.Fatalf("dependency cycle: %s", strings.Join(append(chain, name), " -> "))
		case 2:
			return
		}
		state[name] = 1
		m := p.models[name]
		for _, r := range m.refs {
			visit(r, append(chain, name))
		}
		state[name] = 2
		out = append(out, m)
	}
	names := make([]string, 0, len(p.models))
	for n := range p.models {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		visit(n, nil)
	}
	return out
}

// upstreamSources are the sources a model reads, directly or through refs.
func (p *dbtProject) upstreamSources(name string) []string {
	seen := map[string]bool{}
	var out []string
	var walk func(string)
	walk = func(n string) {
		if seen[n] {
			return
		}
		seen[n] = true
		m := p.models[n]
		for _, s := range m.sources {
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
		for _, r := range m.refs {
			walk(r)
		}
	}
	walk(name)
	return out
}

// testSQL compiles a schema test as dbt-core's built-in test macros do: the
// query returns the failing rows.
func (p *dbtProject) testSQL(st dbtSchemaTest) (string, error) {
	var on string
	var err error
	if st.isSource {
		src, table, _ := strings.Cut(st.on, ".")
		on, err = p.relation(fmt.Sprintf("source('%s', '%s')", src, table))
	} else {
		on, err = p.relation(fmt.Sprintf("ref('%s')", st.on))
	}
	if err != nil {
		return "", err
	}
	c := st.column
	switch st.kind {
	case "not_null":
		return fmt.Sprintf("select * from %s where %s is null", on, c), nil
	case "unique":
		return fmt.Sprintf("select %s as unique_field, count(*) as n_records from %s where %s is not null group by %s having count(*) > 1", c, on, c, c), nil
	case "accepted_values":
		q := make([]string, len(st.values))
		for i, v := range st.values {
			q[i] = "'" + strings.ReplaceAll(v, "'", "''") + "'"
		}
		return fmt.Sprintf("with all_values as (select %s as value_field, count(*) as n_records from %s group by %s) "+
			"select * from all_values where value_field not in (%s)", c, on, c, strings.Join(q, ", ")), nil
	case "relationships":
		to, err := p.relation(st.to)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("with child as (select %s as from_field from %s where %s is not null), "+
			"parent as (select %s as to_field from %s) "+
			"select from_field from child left join parent on child.from_field = parent.to_field where parent.to_field is null",
			c, on, c, st.field, to), nil
	}
	return "", fmt.Errorf("unknown test %s", st.kind)
}

type dbtQuerier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// failures runs a test and returns how many rows fail it.
func (p *dbtProject) failures(ctx context.Context, q dbtQuerier, st dbtSchemaTest) (int64, error) {
	s, err := p.testSQL(st)
	if err != nil {
		return 0, err
	}
	var n int64
	if err := q.QueryRowContext(ctx, "select count(*) from ("+s+") dbt_internal_test").Scan(&n); err != nil {
		return 0, fmt.Errorf("%s: %w\n%s", st, err, s)
	}
	return n, nil
}

func (p *dbtProject) build(ctx context.Context, q dbtQuerier, m *dbtModel) error {
	kind := "VIEW"
	if m.materialized == "table" {
		kind = "TABLE"
	}
	if _, err := q.ExecContext(ctx, fmt.Sprintf("CREATE OR REPLACE %s %q.%q AS\n%s", kind, p.schema, m.name, m.compiled)); err != nil {
		return fmt.Errorf("model %s (%s): %w", m.name, m.path, err)
	}
	return nil
}

func dbtScalar[T any](t *testing.T, ctx context.Context, q dbtQuerier, query string) T {
	t.Helper()
	var v T
	if err := q.QueryRowContext(ctx, query).Scan(&v); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return v
}

// TestDBTProjectBuildsOnDemoWarehouse is 'dbt build' on a fresh demo
// warehouse: every model runs and returns rows, every schema test passes,
// and the marts answer their questions (spot checks against raw tables).
func TestDBTProjectBuildsOnDemoWarehouse(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds a demo warehouse")
	}
	ctx := context.Background()
	p := loadDBTProject(t, dbtDir)
	out := t.TempDir()
	if from := os.Getenv("SEPIPE_DBT_TEST_WAREHOUSE"); from != "" {
		// A warehouse of one's own instead of the demo's: the test works on a
		// copy (its history views still read the original lake).
		for _, suffix := range []string{"", ".wal"} {
			b, err := os.ReadFile(from + suffix)
			if suffix == ".wal" && os.IsNotExist(err) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(out, "warehouse.duckdb"+suffix), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("SEPIPE_DBT_TEST_WAREHOUSE: testing a copy of %s", from)
	} else if _, err := demo.Run(ctx, demo.Config{Out: out, Users: 300, Seed: 1, Days: 3}); err != nil {
		t.Fatal(err)
	}
	// As the shipped profile does: dbt's own file, the published warehouse
	// attached read-only.
	db, err := sql.Open("duckdb", filepath.Join(out, "dbt.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, "ATTACH "+load.Literal(filepath.Join(out, "warehouse.duckdb"))+" AS "+dbtgen.WarehouseAlias+" (READ_ONLY)"); err != nil {
		t.Fatal(err)
	}
	// The checks below name the raw tables unqualified.
	if _, err := db.ExecContext(ctx, "SET search_path = 'main,"+dbtgen.WarehouseAlias+".main'"); err != nil {
		t.Fatal(err)
	}

	// Every declared source must exist, except events while the demo does
	// not produce it yet: say so loudly and keep checking everything else.
	blocked := map[string]string{} // model -> why it cannot run
	var missing []string
	for key, s := range p.sources {
		n := dbtScalar[int64](t, ctx, db, fmt.Sprintf(
			"select count(*) from duckdb_tables() where database_name = '%s' and schema_name = '%s' and table_name = '%s'", s.database, s.schema, s.identifier)) +
			dbtScalar[int64](t, ctx, db, fmt.Sprintf(
				"select count(*) from duckdb_views() where database_name = '%s' and schema_name = '%s' and view_name = '%s'", s.database, s.schema, s.identifier))
		if n == 0 {
			missing = append(missing, key)
		}
	}
	sort.Strings(missing)
	for _, key := range missing {
		var deps []string
		for name := range p.models {
			if slices.Contains(p.upstreamSources(name), key) {
				blocked[name] = key
				deps = append(deps, name)
			}
		}
		sort.Strings(deps)
		if key == dbtSourceEvents {
			t.Errorf("the demo warehouse has no %q table: demo.Run does not produce webhook events yet "+
				"(sepipe listen loads them; the demo is to deliver a subscription's events into it), so these models "+
				"and their tests cannot run: %s", load.EventsTable, strings.Join(deps, ", "))
		} else {
			t.Errorf("source %s is declared but the demo warehouse has no such table or view; models blocked: %s",
				key, strings.Join(deps, ", "))
		}
	}

	if _, err := db.ExecContext(ctx, fmt.Sprintf("CREATE SCHEMA IF NOT EXISTS %q", p.schema)); err != nil {
		t.Fatal(err)
	}
	// Empty sources explain a model without rows.
	empty := map[string]bool{}
	for key := range p.sources {
		if slices.Contains(missing, key) {
			continue
		}
		rel, err := p.relation(fmt.Sprintf("source('%s', '%s')", strings.Split(key, ".")[0], strings.Split(key, ".")[1]))
		if err != nil {
			t.Fatal(err)
		}
		empty[key] = dbtScalar[int64](t, ctx, db, "select count(*) from (select * from "+rel+" limit 1)") == 0
	}
	for _, m := range p.order(t) {
		if why, ok := blocked[m.name]; ok {
			t.Logf("model %s not built: source %s is missing", m.name, why)
			continue
		}
		if bad := slices.ContainsFunc(m.refs, func(r string) bool { _, ok := blocked[r]; return ok }); bad {
			blocked[m.name] = "an upstream model"
			continue
		}
		if err := p.build(ctx, db, m); err != nil {
			t.Errorf("%v", err)
			blocked[m.name] = "its own error"
			continue
		}
		n := dbtScalar[int64](t, ctx, db, fmt.Sprintf("select count(*) from %q.%q", p.schema, m.name))
		if n == 0 {
			var emptyUp []string
			for _, s := range p.upstreamSources(m.name) {
				if empty[s] {
					emptyUp = append(emptyUp, s)
				}
			}
			why := ""
			if len(emptyUp) > 0 {
				sort.Strings(emptyUp)
				why = fmt.Sprintf(" (empty in the demo warehouse: %s", strings.Join(emptyUp, ", "))
				if slices.ContainsFunc(emptyUp, func(s string) bool { return strings.Contains(s, "webhook") || s == dbtSourceEvents }) {
					why += "; demo.Run does not produce webhook activity (a subscription, deliveries, events) yet"
				}
				why += ")"
			}
			t.Errorf("model %s returned no rows%s", m.name, why)
		}
		t.Logf("model %-36s %-5s %6d rows", m.name, m.materialized, n)
	}

	// Every model is documented; every mart says which question it answers.
	for name, m := range p.models {
		doc, ok := p.docs[name]
		switch {
		case !ok:
			t.Errorf("model %s is in no yml file", name)
		case strings.HasPrefix(m.path, "marts/") && !strings.Contains(doc, "?"):
			t.Errorf("mart %s: its description must state the dashboard question it answers", name)
		case strings.TrimSpace(doc) == "":
			t.Errorf("model %s has no description", name)
		}
	}
	for name := range p.docs {
		if _, ok := p.models[name]; !ok {
			t.Errorf("yml documents model %s, which has no .sql file", name)
		}
	}

	// Schema tests.
	counts := map[string]int{}
	for _, st := range p.tests {
		if !st.isSource {
			if _, ok := blocked[st.on]; ok {
				continue
			}
		} else if slices.Contains(missing, st.on) {
			continue
		}
		if st.kind == "relationships" {
			if r := dbtRefCall.FindStringSubmatch(st.to); r != nil {
				if _, ok := blocked[r[1]]; ok {
					continue
				}
			}
		}
		n, err := p.failures(ctx, db, st)
		if err != nil {
			t.Errorf("%s: test %v", st.file, err)
			continue
		}
		if n > 0 {
			s, _ := p.testSQL(st)
			t.Errorf("%s: test %s failed on %d rows:\n%s", st.file, st, n, s)
		}
		counts[st.kind]++
	}
	t.Logf("schema tests run: %v", counts)
	for _, kind := range []string{"unique", "not_null", "accepted_values", "relationships"} {
		if counts[kind] == 0 {
			t.Errorf("no %s test ran", kind)
		}
	}

	t.Run("spot checks", func(t *testing.T) { dbtSpotChecks(t, ctx, db, p, blocked) })
	t.Run("planted duplicate key fails unique", func(t *testing.T) {
		// The published warehouse is attached read-only, as dbt has it: plant
		// in a writable copy attached under the same name.
		cp := filepath.Join(t.TempDir(), "planted.duckdb")
		b, err := os.ReadFile(filepath.Join(out, "warehouse.duckdb"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(cp, b, 0o644); err != nil {
			t.Fatal(err)
		}
		attach := func(path, opts string) {
			t.Helper()
			if _, err := db.ExecContext(ctx, "DETACH "+dbtgen.WarehouseAlias+"; ATTACH "+load.Literal(path)+" AS "+dbtgen.WarehouseAlias+opts); err != nil {
				t.Fatalf("attach %s: %v", path, err)
			}
		}
		attach(cp, "")
		defer attach(filepath.Join(out, "warehouse.duckdb"), " (READ_ONLY)")
		dbtPlantedDuplicate(t, ctx, db, p, blocked)
	})
}

// dbtSourceEvents is the events source of the project.
const dbtSourceEvents = dbtgen.SourceName + "." + load.EventsTable

// dbtSpotChecks compares each mart with the raw tables it summarises.
// Each query returns the rows where mart and raw disagree.
func dbtSpotChecks(t *testing.T, ctx context.Context, db *sql.DB, p *dbtProject, blocked map[string]string) {
	a := p.schema
	checks := []struct {
		mart, what, query string
	}{
		{"mart_course_completion_daily", "completed on the last day = count of Completed rows in userCourseProgress",
			fmt.Sprintf(`select 1 where (select sum(completed) from %[1]s.mart_course_completion_daily
				where snapshot_date = (select max(snapshot_date) from %[1]s.mart_course_completion_daily))
				is distinct from (select count(*) from userCourseProgress where status = 'Completed')`, a)},
		{"mart_course_completion_daily", "per day and course, completed/overdue/assigned = userCourseProgress_history",
			fmt.Sprintf(`(select snapshot_date, course_id, completed, overdue, assigned from %[1]s.mart_course_completion_daily where assigned > 0
				except select snapshot_date, courseId, count(*) filter (where status = 'Completed'), count(*) filter (where status = 'Overdue'), count(*)
				from userCourseProgress_history group by all)
				union all
				(select snapshot_date, courseId, count(*) filter (where status = 'Completed'), count(*) filter (where status = 'Overdue'), count(*)
				from userCourseProgress_history group by all
				except select snapshot_date, course_id, completed, overdue, assigned from %[1]s.mart_course_completion_daily)`, a)},
		{"mart_course_completion_daily", "a row per course and snapshot day",
			fmt.Sprintf(`select 1 where (select count(*) from %[1]s.mart_course_completion_daily) <> (select count(*) from course_history)
				or (select count(distinct snapshot_date) from %[1]s.mart_course_completion_daily) <> (select count(distinct snapshot_date) from course_history)`, a)},
		{"mart_path_completion_daily", "the last day = the path table",
			fmt.Sprintf(`(select path_id, assigned_count, completed_count, completion_pct from %[1]s.mart_path_completion_daily
				where snapshot_date = (select max(snapshot_date) from %[1]s.mart_path_completion_daily)
				except select pathId, assignedCount, completedCount, completionPercentage from path)
				union all
				(select pathId, assignedCount, completedCount, completionPercentage from path
				except select path_id, assigned_count, completed_count, completion_pct from %[1]s.mart_path_completion_daily
				where snapshot_date = (select max(snapshot_date) from %[1]s.mart_path_completion_daily))`, a)},
		{"mart_overdue_learners", "the overdue assignments = rows of userCourseProgress with status Overdue",
			fmt.Sprintf(`(select user_id, course_id, due_at from %[1]s.mart_overdue_learners
				except all select userId, courseId, dueDate from userCourseProgress where status = 'Overdue')
				union all
				(select userId, courseId, dueDate from userCourseProgress where status = 'Overdue'
				except all select user_id, course_id, due_at from %[1]s.mart_overdue_learners)`, a)},
		{"mart_overdue_learners", "days overdue are not negative and every due date is before the tenant's clock",
			fmt.Sprintf(`select * from %[1]s.mart_overdue_learners where days_overdue < 0 or due_at > as_of_at`, a)},
		{"mart_learner_progress", "one row per user; assigned/completed/overdue per user = userCourseProgress",
			fmt.Sprintf(`(select user_id, assigned, completed, overdue from %[1]s.mart_learner_progress
				except select u.userId, count(p.userId), count(*) filter (where p.status = 'Completed'), count(*) filter (where p.status = 'Overdue')
				from "user" u left join userCourseProgress p on p.userId = u.userId group by u.userId)
				union all
				(select u.userId, count(p.userId), count(*) filter (where p.status = 'Completed'), count(*) filter (where p.status = 'Overdue')
				from "user" u left join userCourseProgress p on p.userId = u.userId group by u.userId
				except select user_id, assigned, completed, overdue from %[1]s.mart_learner_progress)`, a)},
		{"mart_curriculum_funnel", "funnel = the curriculum table (users, starts, test and pitch averages)",
			fmt.Sprintf(`(select curriculum_title, course_count, assigned_users, started_users, started_pct, test_average, pitch_average from %[1]s.mart_curriculum_funnel
				except select curriculumTitle, courseCount, userCount, startCount, startPercentage, testAverage, pitchAverage from curriculum)
				union all
				(select curriculumTitle, courseCount, userCount, startCount, startPercentage, testAverage, pitchAverage from curriculum
				except select curriculum_title, course_count, assigned_users, started_users, started_pct, test_average, pitch_average from %[1]s.mart_curriculum_funnel)`, a)},
		{"mart_engagement_by_team_region", "learners, assignments and completions per team and region = the raw tables",
			fmt.Sprintf(`(select team, region, learners, assignments, completed from %[1]s.mart_engagement_by_team_region
				except select u.team, u.region, count(distinct u.userId), count(p.userId), count(*) filter (where p.status = 'Completed')
				from "user" u left join userCourseProgress p on p.userId = u.userId group by all)
				union all
				(select u.team, u.region, count(distinct u.userId), count(p.userId), count(*) filter (where p.status = 'Completed')
				from "user" u left join userCourseProgress p on p.userId = u.userId group by all
				except select team, region, learners, assignments, completed from %[1]s.mart_engagement_by_team_region)`, a)},
		{"mart_content_sharing_assets", "a row per asset with the service's views and shares",
			fmt.Sprintf(`(select asset_id, views, shares from %[1]s.mart_content_sharing_assets
				except select id, coalesce(stats__views, 0), coalesce(stats__shares, 0) from assets)
				union all
				(select id, coalesce(stats__views, 0), coalesce(stats__shares, 0) from assets
				except select asset_id, views, shares from %[1]s.mart_content_sharing_assets)`, a)},
		{"mart_content_sharing_by_division", "assets, themes, views and shares add up to the raw tables",
			fmt.Sprintf(`select 1 where (select (sum(assets), sum(themes), sum(views), sum(shares)) from %[1]s.mart_content_sharing_by_division)
				is distinct from (select ((select count(*) from assets), (select count(*) from themes),
				(select sum(stats__views) from assets), (select sum(stats__shares) from assets)))`, a)},
		{"mart_webhook_delivery_health", "attempts, retries and events add up to webhook_delivery_logs",
			fmt.Sprintf(`select 1 where (select (coalesce(sum(attempts), 0), coalesce(sum(retries), 0), coalesce(sum(events), 0), coalesce(sum(events_delivered), 0)) from %[1]s.mart_webhook_delivery_health)
				is distinct from (select (count(*), count(*) filter (where attempt > 1),
				count(distinct (subscriptionId, eventId)), count(distinct (subscriptionId, eventId)) filter (where outcome = 'delivered'))
				from webhook_delivery_logs)`, a)},
		{"mart_event_activity_daily", "events per type = the events table",
			fmt.Sprintf(`(select event_type, sum(events) from %[1]s.mart_event_activity_daily group by 1
				except select type, count(*) from events group by 1)
				union all
				(select type, count(*) from events group by 1
				except select event_type, sum(events) from %[1]s.mart_event_activity_daily group by 1)`, a)},
	}
	for _, c := range checks {
		if why, ok := blocked[c.mart]; ok {
			t.Errorf("%s: not checked (%s): blocked by %s", c.mart, c.what, why)
			continue
		}
		var n int64
		if err := db.QueryRowContext(ctx, "select count(*) from ("+c.query+") spot").Scan(&n); err != nil {
			t.Errorf("%s: %s: %v", c.mart, c.what, err)
			continue
		}
		if n > 0 {
			t.Errorf("%s: %s: %d rows disagree:\n%s", c.mart, c.what, n, c.query)
		}
	}
}

// dbtPlantedDuplicate plants a duplicate key in the raw input of a staging
// model and in a staging model itself, inside a transaction it rolls
// back, and requires the unique tests to catch them.
func dbtPlantedDuplicate(t *testing.T, ctx context.Context, db *sql.DB, p *dbtProject, blocked map[string]string) {
	if _, ok := blocked["stg_courses"]; ok {
		t.Fatal("stg_courses was not built")
	}
	find := func(on, column string) dbtSchemaTest {
		for _, st := range p.tests {
			if st.kind == "unique" && st.on == on && st.column == column {
				return st
			}
		}
		t.Fatalf("no unique test on %s.%s", on, column)
		return dbtSchemaTest{}
	}
	srcUnique := find(dbtgen.SourceName+".course", "courseId")
	stgUnique := find("stg_courses", "course_id")
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for _, st := range []dbtSchemaTest{srcUnique, stgUnique} {
		if n, err := p.failures(ctx, tx, st); err != nil || n != 0 {
			t.Fatalf("before planting: %s: %d failures, %v", st, n, err)
		}
	}
	// A second row for one course in the raw table (a replace stream's
	// table is a view of its versions of the day): the source test fails;
	// the staging model keeps one row per key, so its test still passes.
	if _, err := tx.ExecContext(ctx, `INSERT INTO course_versions SELECT * FROM course_versions
		WHERE _sepipe_valid_to IS NULL ORDER BY courseId LIMIT 1`); err != nil {
		t.Fatal(err)
	}
	if n, err := p.failures(ctx, tx, srcUnique); err != nil || n != 1 {
		t.Errorf("planted duplicate courseId in course: %s reports %d failing keys, %v; want 1", srcUnique, n, err)
	}
	if n, err := p.failures(ctx, tx, stgUnique); err != nil || n != 0 {
		t.Errorf("stg_courses should deduplicate the planted row: %s reports %d failing keys, %v", stgUnique, n, err)
	}
	// A staging model that lets a duplicate through fails its test (in a
	// transaction of its own: DuckDB writes one database per transaction).
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if tx, err = db.BeginTx(ctx, nil); err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	m := p.models["stg_courses"]
	leaky := *m
	leaky.compiled = fmt.Sprintf("select * from (%s) union all (select * from (%s) order by course_id limit 1)", m.compiled, m.compiled)
	if err := p.build(ctx, tx, &leaky); err != nil {
		t.Fatal(err)
	}
	if n, err := p.failures(ctx, tx, stgUnique); err != nil || n != 1 {
		t.Errorf("duplicate course_id in stg_courses: %s reports %d failing keys, %v; want 1", stgUnique, n, err)
	}
}

// TestDBTSourcesMatchesCommitted: the committed sources.yml is what
// 'sepipe dbt-sources --demo' writes, and the generator follows the
// service's schema.
func TestDBTSourcesMatchesCommitted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := servicetest.NewServer()
	defer srv.Close()
	c, err := extract.New(srv.URL, extract.WithAccessToken(srv.Service.AccessToken()), extract.WithHTTPClient(srv.Client()))
	if err != nil {
		t.Fatal(err)
	}
	got, err := dbtgen.Sources(ctx, c, dbtgen.Config{})
	if err != nil {
		t.Fatal(err)
	}
	committed := filepath.Join(dbtDir, "models", "staging", "sources.yml")
	want, err := os.ReadFile(committed)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is not what the generator writes; run: go run ./cmd/sepipe dbt-sources --demo --out-file dbt/models/staging/sources.yml", committed)
	}
	again, err := dbtgen.Sources(ctx, c, dbtgen.Config{})
	if err != nil || !bytes.Equal(got, again) {
		t.Errorf("generator is not deterministic (%v)", err)
	}

	// Picklist options become accepted_values; keys get unique + not_null.
	var f dbtYAMLFile
	if err := yaml.Unmarshal(got, &f); err != nil {
		t.Fatal(err)
	}
	tests := map[string][]dbtSchemaTest{}
	for _, tb := range f.Sources[0].Tables {
		for _, st := range nodeTests(t, "sources.yml", tb.Name, true, tb) {
			tests[tb.Name+"."+st.column] = append(tests[tb.Name+"."+st.column], st)
		}
	}
	for _, o := range []string{"course", "path", "curriculum", "user", "userCourseProgress"} {
		fields, err := c.Describe(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		for _, fd := range fields {
			if fd.Type != "picklist" {
				continue
			}
			var vals []string
			for _, st := range tests[o+"."+fd.ID] {
				if st.kind == "accepted_values" {
					vals = st.values
				}
			}
			if !slices.Equal(vals, fd.Options) {
				t.Errorf("%s.%s: accepted_values %v, describe options %v", o, fd.ID, vals, fd.Options)
			}
		}
	}
	kinds := func(key string) []string {
		var k []string
		for _, st := range tests[key] {
			k = append(k, st.kind)
		}
		return k
	}
	for key, want := range map[string][]string{
		"course.courseId":            {"unique", "not_null"},
		"user.userId":                {"unique", "not_null"},
		"curriculum.curriculumTitle": {"unique", "not_null"},
		"userCourseProgress.userId":  {"not_null", "relationships"},
		"userCourseProgress.concat_ws('|', userId, courseId)":                        {"unique"},
		"userCourseProgress_history.concat_ws('|', snapshot_date, userId, courseId)": {"unique"},
		"events.id":                            {"unique", "not_null"},
		"webhook_delivery_logs.subscriptionId": {"not_null", "relationships"},
	} {
		if got := kinds(key); !slices.Equal(got, want) {
			t.Errorf("%s: tests %v, want %v", key, got, want)
		}
	}

	// A schema change in the service shows in the next generation.
	drift := servicetest.NewServer(servicetest.WithSchemaDrift(true))
	defer drift.Close()
	dc, err := extract.New(drift.URL, extract.WithAccessToken(drift.Service.AccessToken()), extract.WithHTTPClient(drift.Client()))
	if err != nil {
		t.Fatal(err)
	}
	drifted, err := dbtgen.Sources(ctx, dc, dbtgen.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(drifted, []byte("name: certificateId")) {
		t.Error("drifted schema: certificateId is not in the generated sources")
	}
	if !bytes.Contains(drifted, []byte("name: durationMinutes\n            description: Duration (Minutes)\n            data_type: double")) {
		t.Error("drifted schema: durationMinutes is not typed double")
	}
}

// TestDBTProjectBuildsWithoutWebhookActivity is 'dbt build' on the
// warehouse of a tenant that uses no webhooks: sepipe listen never ran
// and the service lists no subscription, so the webhook collections hold
// no rows (and only the columns the interface document names). Every
// model must still build, and every schema test run.
func TestDBTProjectBuildsWithoutWebhookActivity(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("syncs the fake")
	}
	ctx := context.Background()
	p := loadDBTProject(t, dbtDir)
	_, c := fakeTenant(t, servicetest.WithUsers(30))
	out := t.TempDir()
	if _, err := pipeline.Sync(ctx, c, pipeline.Config{Out: out}); err != nil {
		t.Fatal(err)
	}
	db := buildDBTModels(t, ctx, p, out)
	for _, st := range p.tests {
		if n, err := p.failures(ctx, db, st); err != nil {
			t.Errorf("%s: test %v", st.file, err)
		} else if n > 0 {
			t.Errorf("%s: test %s failed on %d rows", st.file, st, n)
		}
	}
}

// buildDBTModels runs every model of p, in dependency order, on the
// published warehouse of out as the shipped profile has it (dbt's own
// file, the warehouse attached read-only), failing the test on a model
// that does not build. setup runs first (session settings). The database
// is closed with the test.
func buildDBTModels(t *testing.T, ctx context.Context, p *dbtProject, out string, setup ...string) *sql.DB {
	t.Helper()
	db, err := sql.Open("duckdb", filepath.Join(out, "dbt.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, "ATTACH "+load.Literal(filepath.Join(out, "warehouse.duckdb"))+" AS "+dbtgen.WarehouseAlias+" (READ_ONLY); "+
		fmt.Sprintf("CREATE SCHEMA IF NOT EXISTS %q", p.schema)); err != nil {
		t.Fatal(err)
	}
	for _, q := range setup {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for _, m := range p.order(t) {
		if err := p.build(ctx, db, m); err != nil {
			t.Errorf("%v", err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	return db
}

// TestDBTDailyMartsOnIncrementalStream: userCourseProgress synced as
// sepipe.example.yaml configures it (merge, incremental on
// lastModifiedDate), whose history holds each day only the rows read
// that day, gives the same completion over time as the same tenant synced
// whole every day.
func TestDBTDailyMartsOnIncrementalStream(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("syncs the fake over three days, twice")
	}
	ctx := context.Background()
	p := loadDBTProject(t, dbtDir)
	start := time.Now().UTC().Add(-48 * time.Hour).Truncate(time.Second)
	srv, c := fakeTenant(t, servicetest.WithUsers(40), servicetest.WithNow(start))
	whole, incremental := t.TempDir(), t.TempDir()
	streams := map[string]pipeline.StreamConfig{"userCourseProgress": {Mode: load.Merge, PrimaryKey: []string{"userId", "courseId"},
		Cursor: "lastModifiedDate", Lookback: 2 * time.Hour}}
	for d := 0; d < 3; d++ {
		if d > 0 {
			srv.Service.Advance(24 * time.Hour)
		}
		day := start.Add(time.Duration(d) * 24 * time.Hour)
		for _, out := range []string{whole, incremental} {
			cfg := pipeline.Config{Out: out, Now: func() time.Time { return day }}
			if out == incremental {
				cfg.Streams = streams
			}
			if _, err := pipeline.Sync(ctx, c, cfg); err != nil {
				t.Fatal(err)
			}
		}
	}
	buildDBTModels(t, ctx, p, whole).Close()
	db := buildDBTModels(t, ctx, p, incremental)
	if _, err := db.ExecContext(ctx, "ATTACH "+load.Literal(filepath.Join(whole, "dbt.duckdb"))+" AS whole (READ_ONLY)"); err != nil {
		t.Fatal(err)
	}
	cols := "snapshot_date, course_id, assigned, not_started, in_progress, completed, overdue, completed_since_previous_snapshot"
	q := fmt.Sprintf(`select 'incremental' as side, %[1]s from (select %[1]s from %[2]q.mart_course_completion_daily except all select %[1]s from whole.%[2]q.mart_course_completion_daily)
		union all select 'whole', %[1]s from (select %[1]s from whole.%[2]q.mart_course_completion_daily except all select %[1]s from %[2]q.mart_course_completion_daily)
		order by snapshot_date, course_id, side`, cols, p.schema)
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var side, date string
		var course, assigned, notStarted, inProgress, completed, overdue int64
		var since sql.NullInt64
		if err := rows.Scan(&side, &date, &course, &assigned, &notStarted, &inProgress, &completed, &overdue, &since); err != nil {
			t.Fatal(err)
		}
		if n++; n <= 10 {
			t.Errorf("%s %s course %d: assigned %d, not started %d, in progress %d, completed %d, overdue %d, since previous %v",
				side, date, course, assigned, notStarted, inProgress, completed, overdue, since)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n > 0 {
		t.Errorf("mart_course_completion_daily: %d rows differ between the incremental and the whole sync", n)
	}
}

// TestDBTDailyMartOnADayUserCourseProgressMissed: a day whose run
// committed course but not userCourseProgress (failed, deferred by the
// quota, or left out) is a gap in the completion counts, not a day on
// which every course lost its assignments, and the next day's change is
// counted from the last day that has them.
func TestDBTDailyMartOnADayUserCourseProgressMissed(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("syncs the fake over three days")
	}
	ctx := context.Background()
	p := loadDBTProject(t, dbtDir)
	start := time.Now().UTC().Add(-48 * time.Hour).Truncate(time.Second)
	srv, c := fakeTenant(t, servicetest.WithUsers(40), servicetest.WithNow(start))
	out := t.TempDir()
	var days []string
	for d := 0; d < 3; d++ {
		if d > 0 {
			srv.Service.Advance(24 * time.Hour)
		}
		day := start.Add(time.Duration(d) * 24 * time.Hour)
		days = append(days, day.Format(time.DateOnly))
		cfg := pipeline.Config{Out: out, Now: func() time.Time { return day }}
		if d == 1 {
			cfg.Only = []string{"course", "path", "curriculum", "user"}
		}
		if _, err := pipeline.Sync(ctx, c, cfg); err != nil {
			t.Fatal(err)
		}
	}
	db := buildDBTModels(t, ctx, p, out)
	mart := fmt.Sprintf("%q.mart_course_completion_daily", p.schema)
	if n := dbtScalar[int64](t, ctx, db, fmt.Sprintf(`select count(*) from %s where snapshot_date = '%s' and assigned is not null`, mart, days[1])); n != 0 {
		t.Errorf("%s, a day without userCourseProgress: %d courses with assignment counts, want none (a gap)", days[1], n)
	}
	if n := dbtScalar[int64](t, ctx, db, fmt.Sprintf(`select count(*) from %s where snapshot_date = '%s'`, mart, days[1])); n == 0 {
		t.Errorf("%s: no rows; the course's own counts were synced that day", days[1])
	}
	q := fmt.Sprintf(`select count(*) from %[1]s last join %[1]s first on first.course_id = last.course_id
		where last.snapshot_date = '%[2]s' and first.snapshot_date = '%[3]s'
		and last.completed_since_previous_snapshot is distinct from last.completed - first.completed`, mart, days[2], days[0])
	if n := dbtScalar[int64](t, ctx, db, q); n != 0 {
		t.Errorf("%s: %d courses whose completions since the previous snapshot are not counted from %s", days[2], n, days[0])
	}
	for _, st := range p.tests {
		if st.on != "mart_course_completion_daily" {
			continue
		}
		if n, err := p.failures(ctx, db, st); err != nil || n > 0 {
			t.Errorf("%s: test %s: %d failing rows, %v", st.file, st, n, err)
		}
	}
}

// TestDBTMartsIgnoreTheSessionTimeZone: dbt-duckdb's session runs in the
// machine's time zone, but the marts count days in UTC (the tenant's clock
// as the service sends it, as sepipe's own SQL does): the same warehouse
// gives the same marts on a machine in UTC+14 or UTC-8.
func TestDBTMartsIgnoreTheSessionTimeZone(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("syncs the fake")
	}
	ctx := context.Background()
	p := loadDBTProject(t, dbtDir)
	_, c := fakeTenant(t, servicetest.WithUsers(60))
	out := t.TempDir()
	if _, err := pipeline.Sync(ctx, c, pipeline.Config{Out: out}); err != nil {
		t.Fatal(err)
	}
	for _, tz := range []string{"Pacific/Kiritimati", "America/Los_Angeles"} {
		db := buildDBTModels(t, ctx, p, out, "SET TimeZone = '"+tz+"'")
		q := fmt.Sprintf(`select count(*) from %q.mart_overdue_learners
			where days_overdue is distinct from greatest(cast(as_of_at at time zone 'UTC' as date) - cast(due_at at time zone 'UTC' as date), 0)`, p.schema)
		if n := dbtScalar[int64](t, ctx, db, q); n != 0 {
			t.Errorf("TimeZone %s: %d of %d overdue assignments have days_overdue other than the UTC days from due date to the tenant's clock", tz, n,
				dbtScalar[int64](t, ctx, db, fmt.Sprintf("select count(*) from %q.mart_overdue_learners", p.schema)))
		}
		db.Close()
	}
}

// TestDBTSourcesOfAHostileTenant: the sources.yml of a tenant whose object
// ids are hostile (one is "events", one "_sepipe_runs", "user" and
// "User", "user_history", "x[1]", "q?y=1", a tab) and whose fields
// differ by case only or are named snapshot_date names each table as the
// warehouse does (load.Names), once, with its columns once, and every
// source test compiles and runs on the synced warehouse.
func TestDBTSourcesOfAHostileTenant(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("syncs the fake")
	}
	ctx := context.Background()
	_, c := fakeTenant(t, servicetest.WithUsers(10), servicetest.WithHostile())
	out := t.TempDir()
	if _, err := pipeline.Sync(ctx, c, pipeline.Config{Out: out}); err != nil {
		t.Fatal(err)
	}
	got, err := dbtgen.Sources(ctx, c, dbtgen.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var f dbtYAMLFile
	if err := yaml.Unmarshal(got, &f); err != nil {
		t.Fatal(err)
	}
	tables := map[string]string{}
	for _, tb := range f.Sources[0].Tables {
		id := tb.Identifier
		if id == "" {
			id = tb.Name
		}
		if prev, dup := tables[strings.ToLower(id)]; dup {
			t.Errorf("table %q declared twice (as %q and %q)", id, prev, tb.Name)
		}
		tables[strings.ToLower(id)] = tb.Name
		cols := map[string]bool{}
		for _, col := range tb.Columns {
			if cols[strings.ToLower(col.Name)] {
				t.Errorf("table %s: column %q declared twice", tb.Name, col.Name)
			}
			cols[strings.ToLower(col.Name)] = true
		}
	}

	// The project with this sources.yml, its source tests on the warehouse.
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(dbtDir)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "models", "staging", "sources.yml"), got, 0o644); err != nil {
		t.Fatal(err)
	}
	p := loadDBTProject(t, dir)
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, "ATTACH "+load.Literal(filepath.Join(out, "warehouse.duckdb"))+" AS "+dbtgen.WarehouseAlias+" (READ_ONLY)"); err != nil {
		t.Fatal(err)
	}
	wh := warehouseRelations(t, ctx, db)
	for key, s := range p.sources {
		if !wh[strings.ToLower(s.identifier)] {
			t.Errorf("source %s: the warehouse has no table or view %q", key, s.identifier)
		}
	}
	for _, st := range p.tests {
		if !st.isSource || !wh[strings.ToLower(p.sources[st.on].identifier)] {
			continue
		}
		if _, err := p.failures(ctx, db, st); err != nil {
			t.Errorf("%v", err)
		}
	}
}

// warehouseRelations are the tables and views of the attached warehouse
// (lower case).
func warehouseRelations(t *testing.T, ctx context.Context, db *sql.DB) map[string]bool {
	t.Helper()
	rows, err := db.QueryContext(ctx, `select table_name from duckdb_tables() where database_name = ?
		union all select view_name from duckdb_views() where database_name = ?`, dbtgen.WarehouseAlias, dbtgen.WarehouseAlias)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		out[strings.ToLower(n)] = true
	}
	return out
}

// TestDBTSourcesOfAnAppendStream: a stream configured as append keeps
// every day's rows in its table, so its key is unique per day, not across
// the table. The sources tested unique(user.userId) whatever the mode, and
// the project failed its source tests after the second night of a tenant
// syncing user as append (as sepipe.example.yaml did). With the append
// streams given, the table's test is unique on (_sepipe_snapshot_date,
// key), which holds, and still finds a key twice in one day. A collection
// configured as append (assets) alike: its id was tested unique across
// the table whatever the append streams given.
func TestDBTSourcesOfAnAppendStream(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("syncs the fake over two days")
	}
	ctx := context.Background()
	start := time.Now().UTC().Add(-24 * time.Hour).Truncate(time.Second)
	srv, c := fakeTenant(t, servicetest.WithUsers(20), servicetest.WithNow(start))
	out := t.TempDir()
	for d := range 2 {
		if d > 0 {
			srv.Service.Advance(24 * time.Hour)
		}
		day := start.Add(time.Duration(d) * 24 * time.Hour)
		cfg := pipeline.Config{Out: out, Now: func() time.Time { return day },
			Streams: map[string]pipeline.StreamConfig{"user": {Mode: load.Append}, pipeline.StreamAssets: {Mode: load.Append}},
			Only:    []string{"user", pipeline.StreamAssets}}
		if _, err := pipeline.Sync(ctx, c, cfg); err != nil {
			t.Fatal(err)
		}
	}
	// failing runs the unique source tests of table and says how many fail.
	failing := func(table string, appendStreams ...string) (tests, failed int) {
		t.Helper()
		got, err := dbtgen.Sources(ctx, c, dbtgen.Config{Append: appendStreams})
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := os.CopyFS(dir, os.DirFS(dbtDir)); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "models", "staging", "sources.yml"), got, 0o644); err != nil {
			t.Fatal(err)
		}
		p := loadDBTProject(t, dir)
		db, err := sql.Open("duckdb", "")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		db.SetMaxOpenConns(1)
		if _, err := db.ExecContext(ctx, "ATTACH "+load.Literal(filepath.Join(out, "warehouse.duckdb"))+" AS "+dbtgen.WarehouseAlias+" (READ_ONLY)"); err != nil {
			t.Fatal(err)
		}
		for _, st := range p.tests {
			if !st.isSource || p.sources[st.on].identifier != table || st.kind != "unique" {
				continue
			}
			tests++
			n, err := p.failures(ctx, db, st)
			if err != nil {
				t.Fatal(err)
			}
			if n > 0 {
				failed++
			}
		}
		return tests, failed
	}
	for _, table := range []string{"user", pipeline.StreamAssets} {
		if tests, failed := failing(table); tests == 0 || failed == 0 {
			t.Fatalf("without the append streams: %d unique tests on %s, %d failing; want the key's test to fail on two days' rows (the test is void)", tests, table, failed)
		}
		if tests, failed := failing(table, "user", pipeline.StreamAssets); tests == 0 || failed > 0 {
			t.Errorf("with %s an append stream: %d unique tests on it, %d failing; want one, passing", table, tests, failed)
		}
	}
}

// TestDBTModelTestsHoldForAnyTenantsValues: the shipped project's own tests
// (staging.yml, marts.yml) held our fake's teams, regions, roles, course
// categories and statuses, asset types, delivery outcomes and event types
// as accepted_values, so 'dbt build' failed for every real tenant, whose
// teams and categories are its own and whose asset types and event types
// the interface document does not list. A warehouse whose values are a
// tenant's own must pass every model test; sources.yml keeps testing
// picklists against the tenant's own /describe.
func TestDBTModelTestsHoldForAnyTenantsValues(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("syncs the fake")
	}
	ctx := context.Background()
	p := loadDBTProject(t, dbtDir)
	_, c := fakeTenant(t, servicetest.WithUsers(20))
	out := t.TempDir()
	if _, err := pipeline.Sync(ctx, c, pipeline.Config{Out: out}); err != nil {
		t.Fatal(err)
	}
	// The tenant's own values, written into the published warehouse (the
	// versions the replace streams' tables and histories show).
	wh, err := sql.Open("duckdb", filepath.Join(out, "warehouse.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`UPDATE user_versions SET team = 'Field Sales', region = 'ANZ', role = 'Enablement Lead', status = 'Suspended'`,
		`UPDATE course_versions SET category = 'Security Awareness', status = 'Under Review'`,
		`UPDATE path_versions SET status = 'Paused'`,
		`UPDATE assets_versions SET "type" = 'video'`,
		`INSERT INTO events (id, type, time, received_at, raw) VALUES ('e1', 'content-downloaded', now(), now(), '{}')`,
	} {
		if _, err := wh.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := wh.Close(); err != nil {
		t.Fatal(err)
	}
	db := buildDBTModels(t, ctx, p, out)
	ran := 0
	for _, st := range p.tests {
		if st.isSource {
			continue
		}
		n, err := p.failures(ctx, db, st)
		if err != nil {
			t.Errorf("%s: %v", st.file, err)
			continue
		}
		ran++
		if n > 0 {
			t.Errorf("%s: test %s failed on %d rows, on values a tenant defines for itself", st.file, st, n)
		}
	}
	if ran == 0 {
		t.Fatal("no model test ran")
	}
}

// fakeTenant starts the fake service with opts and a client of it with
// every credential and no rate ceiling; the server closes with the test.
func fakeTenant(t *testing.T, opts ...servicetest.Option) (*servicetest.Server, *extract.Client) {
	t.Helper()
	srv := servicetest.NewServer(opts...)
	t.Cleanup(srv.Close)
	c, err := extract.New(srv.URL, extract.WithAccessToken(srv.Service.AccessToken()), extract.WithAPIToken(srv.Service.APIToken()),
		extract.WithHTTPClient(srv.Client()), extract.WithRateLimit(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	return srv, c
}

// TestDBTSourceFreshnessOnTheWarehouse: every source table carries a
// loaded_at_field and a freshness (its own or the source's), and each
// loaded_at_field, run as dbt source freshness runs it (max() over the
// table, the warehouse attached as dbt attaches it), says when the stream
// was last committed: a stream the second run did not read keeps the first
// run's time, one it read the second's; the events table its newest event;
// sepipe's own tables the last run.
func TestDBTSourceFreshnessOnTheWarehouse(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("syncs the fake")
	}
	ctx := context.Background()
	_, c := fakeTenant(t, servicetest.WithUsers(20))
	out := t.TempDir()
	first, err := pipeline.Sync(ctx, c, pipeline.Config{Out: out})
	if err != nil {
		t.Fatal(err)
	}
	sel, err := pipeline.Select(ctx, c, pipeline.Ask{Objects: []string{"course"}})
	if err != nil {
		t.Fatal(err)
	}
	second, err := pipeline.Sync(ctx, c, pipeline.Config{Out: out, Selection: sel})
	if err != nil {
		t.Fatal(err)
	}
	lake := load.Lake{Root: out}
	if _, err := load.LoadEvents(ctx, lake, []service.Event{{ID: "ev-1", Type: "COURSE_COMPLETED", Raw: []byte(`{}`), Data: []byte(`{}`),
		ReceivedAt: time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)}}); err != nil {
		t.Fatal(err)
	}
	if err := load.PublishState(ctx, lake); err != nil {
		t.Fatal(err)
	}

	got, err := dbtgen.Sources(ctx, c, dbtgen.Config{WarnAfter: 90 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var f dbtYAMLFile
	if err := yaml.Unmarshal(got, &f); err != nil {
		t.Fatal(err)
	}
	src := f.Sources[0]
	if fmt.Sprint(src.Freshness) != "map[error_after:map[count:3 period:hour] warn_after:map[count:90 period:minute]]" {
		t.Errorf("source freshness %v, want warn after 90 minutes, error after 3 hours", src.Freshness)
	}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, "SET TimeZone = 'UTC'; ATTACH "+load.Literal(lake.WarehousePath())+" AS "+dbtgen.WarehouseAlias+" (READ_ONLY)"); err != nil {
		t.Fatal(err)
	}
	finished := func(run string) time.Time {
		var at time.Time
		if err := db.QueryRowContext(ctx, "SELECT finished_at FROM "+dbtgen.WarehouseAlias+".main._sepipe_runs WHERE run_id = ?", run).Scan(&at); err != nil {
			t.Fatal(err)
		}
		return at.UTC()
	}
	firstAt, secondAt := finished(first.RunID), finished(second.RunID)
	want := map[string]time.Time{"course": secondAt, "course_history": secondAt, "user": firstAt, "user_history": firstAt,
		"assets": firstAt, "events": time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC), "_sepipe_runs": secondAt, "_sepipe_schemas": secondAt}
	seen := 0
	for _, tb := range src.Tables {
		if tb.LoadedAtField == "" {
			t.Errorf("table %s has no loaded_at_field", tb.Name)
			continue
		}
		if tb.Freshness == nil && src.Freshness == nil {
			t.Errorf("table %s has no freshness", tb.Name)
		}
		// What dbt-duckdb's collect_freshness runs.
		var at sql.NullTime
		q := "select max(" + tb.LoadedAtField + ") as max_loaded_at, current_timestamp as snapshotted_at from " +
			dbtgen.WarehouseAlias + ".main." + load.Ident(tb.Name)
		if err := db.QueryRowContext(ctx, q).Scan(&at, new(time.Time)); err != nil {
			t.Errorf("table %s: loaded_at_field does not run: %v\n%s", tb.Name, err, q)
			continue
		}
		if w, ok := want[tb.Name]; ok {
			seen++
			if !at.Valid || !at.Time.UTC().Equal(w) {
				t.Errorf("table %s: max(loaded_at_field) = %v, want %v", tb.Name, at, w)
			}
		}
	}
	if seen != len(want) {
		t.Errorf("checked %d of the %d tables expected", seen, len(want))
	}
}
