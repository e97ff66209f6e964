package load

import (
	"context"
	"database/sql"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// A corrupt header or free list is an error (the publish then writes the
// file anew), never a panic nor an allocation it names: a count near 2^60
// overflowed int64(n)*each into a negative slice capacity ("makeslice: cap
// out of range"; found by review).
func TestMetadataChainsResolveCorruptCountNoPanic(t *testing.T) {
	t.Parallel()
	const alloc = 262144
	b := make([]byte, 3*4096+alloc)
	copy(b[8:], "DUCK")
	for i := 1; i <= 2; i++ {
		h := b[4096*i+8:]
		binary.LittleEndian.PutUint64(h[0:], uint64(i)) // iteration
		binary.LittleEndian.PutUint64(h[8:], 0)         // meta block
		binary.LittleEndian.PutUint64(h[16:], 0)        // free list: block 0, sub-block 0
		binary.LittleEndian.PutUint64(h[24:], 1<<62)    // block_count (corrupt)
		binary.LittleEndian.PutUint64(h[32:], alloc)
	}
	sb := b[3*4096+8:]
	binary.LittleEndian.PutUint64(sb[0:], ^uint64(0)) // no next sub-block
	binary.LittleEndian.PutUint64(sb[8:], 1<<60)      // free block count (corrupt)
	path := filepath.Join(t.TempDir(), "corrupt.duckdb")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("metadataChainsResolve panicked on a corrupt free list: %v", r)
		}
	}()
	if err := metadataChainsResolve(path); err == nil {
		t.Fatal("a corrupt free list passed")
	}
}

// The working database of an output folder whose path holds '#' is still
// opened with metadata reuse off: duckdb-go reads the DSN as a URL, whose
// "#..." is a fragment, so the option was dropped (found by review).
func TestMetadataReuseOffWithHashInFolder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	lake := Lake{Root: filepath.Join(t.TempDir(), "team#1")}
	wh, err := OpenState(ctx, lake)
	if err != nil {
		t.Fatal(err)
	}
	defer wh.Close()
	var reuse bool
	if err := wh.DB().QueryRowContext(ctx, `SELECT current_setting('experimental_metadata_reuse')::BOOLEAN`).Scan(&reuse); err != nil {
		t.Fatal(err)
	}
	if reuse {
		t.Error("output folder with '#' in its path: metadata reuse is on (the DSN's options were dropped)")
	}
}

// A working database in a storage version newer than StorageVersion, which
// DuckDB 1.1 refuses to open whatever its metadata chains, is not copied
// byte for byte but written anew, in StorageVersion's (found by review).
func TestMetadataChainsResolveNewerStorageVersion(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "latest.duckdb")
	db, err := sql.Open("duckdb", path+"?storage_compatibility_version=latest")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`CREATE TABLE t AS SELECT range AS id, md5(range::VARCHAR) AS name FROM range(100000)`, `CHECKPOINT`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	var tags string
	db.QueryRow(`SELECT tags::VARCHAR FROM duckdb_databases() WHERE database_name = current_database()`).Scan(&tags)
	db.Close()
	if err := metadataChainsResolve(path); err == nil {
		t.Errorf("a database in storage version %s passed: its byte copy does not open in DuckDB 1.1", tags)
	}
}
