package pipeline_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"go.yaml.in/yaml/v3"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/internal/dbtgen"
	"github.com/sepipe/sepipe/internal/warehousetest"
	"github.com/sepipe/sepipe/lakehouse"
	"github.com/sepipe/sepipe/load"
	"github.com/sepipe/sepipe/schemas"
	"github.com/sepipe/sepipe/service"
	"github.com/sepipe/sepipe/transform"
)

// sample is a JSON value of each way a type is read (schemas.Value), and
// the text the warehouse gives it back as. A type whose Value has no
// sample fails TestEveryTypeThroughEveryStage: add one.
var sample = map[schemas.Value]struct{ json, text string }{
	schemas.ValueInt:    {`42`, "42"},
	schemas.ValueFloat:  {`2.5`, "2.5"},
	schemas.ValueText:   {`"text"`, "text"},
	schemas.ValueOption: {`"A"`, "A"},
	schemas.ValueTime:   {`"2026-01-02T03:04:05Z"`, "2026-01-02 03:04:05+00"},
	schemas.ValueBool:   {`true`, "true"},
	schemas.ValueJSON:   {`{"a":[1,2]}`, `{"a":[1,2]}`},
}

// walkSchema is the schema of a stream with an id and one field v of type
// t: a report object's when a describe may declare t, a collection's
// otherwise.
func walkSchema(t *testing.T, ty schemas.Type) *arrow.Schema {
	t.Helper()
	fields := []service.Field{{ID: "id", Type: service.TypeInt}, {ID: "v", DisplayName: "V", Type: ty.Name}}
	if ty.Value == schemas.ValueOption {
		fields[1].Options = []string{"A", "B"}
	}
	build := schemas.ForCollection
	if ty.Describe {
		build = schemas.FromDescribe
	}
	s, err := build("walk", fields)
	if err != nil {
		t.Fatalf("type %s: schema: %v", ty.Name, err)
	}
	return s
}

// TestEveryTypeThroughEveryStage walks every type of the one table of
// field types (schemas.Types) through every stage of the data path and
// fails where a stage does not give it what the table says, or falls
// back on something else without a word: the decoder (a value of it
// decodes, no reject), the Parquet writer (the file holds the table's
// Arrow type and the value), the DuckDB load (the column has the table's
// DuckDB type and the value), the Iceberg lake (the table's column has its
// Iceberg type), the dbt sources (data_type is the DuckDB type), the
// service's filters (a describe's type has an operator) and the widening
// rule (every pair widens to a type whose column holds both). Adding a
// type is adding a row to schemas.Types, and whatever this test then
// demands.
func TestEveryTypeThroughEveryStage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	lc := fileLake(t.TempDir())
	lh, err := lakehouse.Open(ctx, *lc)
	if err != nil {
		t.Fatal(err)
	}
	defer lh.Close()
	for i, ty := range schemas.Types {
		t.Run(ty.Name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
			defer mem.AssertSize(t, 0)
			smp, ok := sample[ty.Value]
			if !ok {
				t.Fatalf("type %s: no sample value for its Value %d in this test: add one", ty.Name, ty.Value)
			}
			s := walkSchema(t, ty)
			if !arrow.TypeEqual(s.Field(1).Type, ty.Arrow) {
				t.Errorf("schema: Arrow type %s, the table says %s", s.Field(1).Type, ty.Arrow)
			}

			// The decoder.
			dec, err := transform.NewDecoder(s, transform.WithAllocator(mem))
			if err != nil {
				t.Fatalf("decoder: %v", err)
			}
			defer dec.Release()
			res, err := dec.DecodePage(1, []byte(`{"results":[{"id":1,"v":`+smp.json+`}]}`))
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			defer res.Record.Release()
			if len(res.Rejects) > 0 || res.NulledValues > 0 || res.Record.Column(1).IsNull(0) {
				t.Errorf("decode %s as %s: rejects %v, nulled %d", smp.json, ty.Name, res.Rejects, res.NulledValues)
			}

			// The Parquet writer: the file holds the table's Arrow type.
			out := t.TempDir()
			lake := load.Lake{Root: out}
			run, day := fmt.Sprintf("20261123T000000Z-%08x", i), "2026-11-23"
			pw, err := load.NewParquetWriter(lake.StagingDir(run, "walk", day), "walk", s, load.WithParquetAllocator(mem))
			if err != nil {
				t.Fatal(err)
			}
			if err := pw.Write(res.Record); err != nil {
				t.Fatalf("parquet: %v", err)
			}
			if err := pw.Close(); err != nil {
				t.Fatalf("parquet: %v", err)
			}
			if got, want := parquetColumn(t, pw.Files()[0], "v"), parquetOf(t, ty.Arrow); got != want {
				t.Errorf("parquet: column v is %s, the table's Arrow type %s is %s", got, ty.Arrow, want)
			}

			// The DuckDB load: the column has the table's type.
			wh, err := load.OpenState(ctx, lake)
			if err != nil {
				t.Fatal(err)
			}
			now, _ := time.Parse(time.DateOnly, day)
			err = wh.Commit(ctx, load.Run{ID: run, Started: now, Finished: now, Status: "succeeded", SnapshotDate: day},
				[]load.Table{{Object: "walk", Schema: s, Files: pw.Files(), Rows: pw.Rows(), Mode: load.Replace}})
			if err == nil {
				err = wh.Publish(ctx)
			}
			wh.Close()
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			db := warehousetest.Open(t, out)
			got := warehousetest.Scalar[string](t, db, `SELECT data_type FROM duckdb_columns() WHERE table_name = 'walk_history' AND column_name = 'v'`)
			if got != ty.DuckDB && !slices.Contains(ty.DuckDBAliases, got) {
				t.Errorf("duckdb: column v is %s, the table says %s", got, ty.DuckDB)
			}
			if v := warehousetest.Scalar[string](t, db, `SELECT CAST(v AS VARCHAR) FROM walk_history`); v != smp.text {
				t.Errorf("duckdb: value %q, want %q", v, smp.text)
			}

			// The Iceberg lake: the column has the table's Iceberg type.
			sw, err := lh.NewStageWriter(ctx, lakehouse.TableSpec{Stream: "walk_" + strings.ReplaceAll(ty.Name, " ", "_"), Schema: s, Mode: lakehouse.Replace},
				lakehouse.Run{ID: run, Day: day})
			if err != nil {
				t.Fatalf("iceberg: %v", err)
			}
			if err := sw.Write(res.Record); err != nil {
				t.Fatalf("iceberg: %v", err)
			}
			if err := sw.Close(); err != nil {
				t.Fatalf("iceberg: %v", err)
			}
			tbl, err := lh.LoadTable(ctx, "", "walk_"+ty.Name)
			if err != nil {
				t.Fatal(err)
			}
			if f, ok := tbl.Schema().FindFieldByName("v"); !ok || f.Type.String() != ty.Iceberg {
				t.Errorf("iceberg: column v is %v, the table says %s", f.Type, ty.Iceberg)
			}
			_ = sw.Abort()

			// The service's filters: a type a describe declares has an
			// operator the client checks for it.
			if ty.Describe {
				fs := []service.Field{{ID: "v", Type: ty.Name, Options: []string{"A"}}}
				taken := false
				for _, op := range []string{"eq", "in"} {
					var v any = 1
					if ty.Value == schemas.ValueText || ty.Value == schemas.ValueOption {
						v = "A"
					} else if ty.Value == schemas.ValueTime {
						v = "2026-01-02"
					}
					if (extract.Query{Filters: []extract.Filter{{Field: "v", Operator: op, Values: []any{v}}}}).Validate(fs) == nil {
						taken = true
					}
				}
				if !taken {
					t.Errorf("filters: no operator of the service takes a field of type %s (extract/query.go)", ty.Name)
				}
			}

			// Widening: every pair widens to a type of the table whose
			// DuckDB column the warehouse's widening agrees on.
			for _, other := range schemas.Types {
				w, ok := schemas.TypeNamed(schemas.Widen(ty.Name, other.Name))
				if !ok {
					t.Errorf("Widen(%s, %s) is not a type", ty.Name, other.Name)
				}
				if ty.Value != other.Value && w.Name == ty.Name && w.Number == 0 && w.Value != schemas.ValueJSON && w.Value != schemas.ValueText {
					t.Errorf("Widen(%s, %s) = %s: a column of %s cannot hold %s", ty.Name, other.Name, w.Name, w.Name, other.Name)
				}
			}
		})
	}

	// The dbt sources: every type a describe declares is typed as the
	// warehouse types it; the collections' own types too, where their
	// seed fields have them.
	src := &describeOnly{fields: map[string][]service.Field{}}
	for _, ty := range schemas.Types {
		if ty.Describe {
			src.fields["walk"] = append(src.fields["walk"], service.Field{ID: "v_" + ty.Name, DisplayName: ty.Name, Type: ty.Name, Options: []string{"A"}})
		}
	}
	y, err := dbtgen.Sources(ctx, src, dbtgen.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Sources []struct {
			Tables []struct {
				Name    string `yaml:"name"`
				Columns []struct {
					Name     string `yaml:"name"`
					DataType string `yaml:"data_type"`
				} `yaml:"columns"`
			} `yaml:"tables"`
		} `yaml:"sources"`
	}
	if err := yaml.Unmarshal(y, &doc); err != nil {
		t.Fatal(err)
	}
	typed := map[string]bool{} // data types the sources give
	for _, s := range doc.Sources {
		for _, tb := range s.Tables {
			for _, c := range tb.Columns {
				typed[c.DataType] = true
				if tb.Name == "walk" {
					ty, _ := schemas.TypeNamed(strings.TrimPrefix(c.Name, "v_"))
					if strings.HasPrefix(c.Name, "v_") && c.DataType != strings.ToLower(ty.DuckDB) {
						t.Errorf("dbt sources: column %s is %s, the table says %s", c.Name, c.DataType, strings.ToLower(ty.DuckDB))
					}
				}
			}
		}
	}
	for _, ty := range schemas.Types {
		if !typed[strings.ToLower(ty.DuckDB)] {
			t.Errorf("dbt sources: no column of type %s (%s)", ty.Name, strings.ToLower(ty.DuckDB))
		}
	}
}

// describeOnly is a source of one report object, walk, for the dbt
// sources.
type describeOnly struct{ fields map[string][]service.Field }

func (d *describeOnly) Objects(context.Context) ([]extract.Object, error) {
	return []extract.Object{{ID: "walk", DisplayName: "Walk"}}, nil
}

func (d *describeOnly) Describe(_ context.Context, id string) ([]service.Field, error) {
	return d.fields[id], nil
}

func (d *describeOnly) ReadObject(context.Context, string, extract.Query, extract.PageFunc) (extract.ReadStats, error) {
	return extract.ReadStats{}, fmt.Errorf("not read")
}

func (d *describeOnly) ReadList(context.Context, extract.List, extract.CollectionQuery, extract.PageFunc) (extract.ReadStats, error) {
	return extract.ReadStats{}, fmt.Errorf("not read")
}

func (d *describeOnly) CanRead(string) bool { return true }

// parquetColumn is a Parquet file's column name: its physical and
// logical type.
func parquetColumn(t *testing.T, path, name string) string {
	t.Helper()
	pf, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	sc := pf.MetaData().Schema
	i := sc.ColumnIndexByName(name)
	if i < 0 {
		t.Fatalf("%s: no column %s", path, name)
	}
	c := sc.Column(i)
	return parquetTypeText(c.PhysicalType().String() + " " + c.LogicalType().String())
}

// parquetTypeText drops what a writer's settings vary of a logical type's
// text (whether a converted type is set as well).
func parquetTypeText(s string) string {
	return regexp.MustCompile(`, (is_from_converted_type|force_set_converted_type)=\w+`).ReplaceAllString(s, "")
}

// parquetOf is the Parquet column pqarrow makes of Arrow type dt: its
// physical and logical type.
func parquetOf(t *testing.T, dt arrow.DataType) string {
	t.Helper()
	sc, err := pqarrow.ToParquet(arrow.NewSchema([]arrow.Field{{Name: "v", Type: dt, Nullable: true}}, nil), nil, pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	c := sc.Column(0)
	return parquetTypeText(c.PhysicalType().String() + " " + c.LogicalType().String())
}
