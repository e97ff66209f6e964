package warehousetest

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/sepipe/sepipe/load"
)

// Open opens the published warehouse of the output folder out read-only,
// as a dashboard would, and closes it when the test ends.
func Open(t testing.TB, out string) *sql.DB {
	t.Helper()
	wh, err := load.OpenReadOnly(context.Background(), filepath.Join(out, "warehouse.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wh.Close() })
	return wh.DB()
}

// Scalar runs q, which must give one row of one column, and returns it;
// the test fails on any error.
func Scalar[T any](t testing.TB, db *sql.DB, q string, args ...any) T {
	t.Helper()
	var v T
	if err := db.QueryRow(q, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return v
}

// Strings runs q, which must give one column of text, and returns its
// rows; the test fails on any error.
func Strings(t testing.TB, db *sql.DB, q string, args ...any) []string {
	t.Helper()
	rows, err := db.Query(q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return out
}

// StateScalar runs q, one row of one column, on the working database of
// the output folder out (.sepipe/state.duckdb, opened read-only and
// closed again at once, so the next run can write it).
func StateScalar[T any](t testing.TB, out, q string, args ...any) T {
	t.Helper()
	wh, err := load.OpenReadOnly(context.Background(), load.Lake{Root: out}.StatePath())
	if err != nil {
		t.Fatal(err)
	}
	defer wh.Close()
	return Scalar[T](t, wh.DB(), q, args...)
}
