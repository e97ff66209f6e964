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
