package load_test

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/sepipe/sepipe/load"
)

// TestNothingLeavesTheOutputFolder: the writer and the publish go through
// the output folder as an os.Root, so neither a name that climbs out
// ("..") nor a symlink planted inside the folder makes sepipe write
// outside it.
func TestNothingLeavesTheOutputFolder(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	outside := filepath.Join(parent, "outside")
	if err := os.Mkdir(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	lake := load.Lake{Root: filepath.Join(parent, "out")}
	if err := lake.CheckWritable(); err != nil {
		t.Fatal(err)
	}
	s := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	const day = "2026-11-23"

	// A name that climbs out is refused before anything is created.
	_, err := load.NewParquetWriter(lake.StagingDir("r1", "../../../../outside", day), "evil", s, load.InsideFolder(lake.Root))
	if !errors.Is(err, load.ErrOutside) {
		t.Errorf("writer for a climbing name: %v, want ErrOutside", err)
	}
	if err := lake.Publish("r1", "../../outside", day); !errors.Is(err, load.ErrOutside) {
		t.Errorf("publish of a climbing name: %v, want ErrOutside", err)
	}

	// A symlink in the staging folder pointing out: the writer cannot
	// create its file through it.
	staged := lake.StagingDir("r1", "linked", day)
	if err := os.MkdirAll(filepath.Dir(staged), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, staged); err != nil {
		t.Fatal(err)
	}
	if w, err := load.NewParquetWriter(staged, "linked", s, load.InsideFolder(lake.Root)); err == nil {
		if err := w.Close(); err == nil {
			t.Error("a writer wrote through a symlink leading out of the output folder")
		}
	}

	// A symlink where the published object's folder goes: the publish
	// cannot move the partition through it.
	good := lake.StagingDir("r2", "obj", day)
	w, err := load.NewParquetWriter(good, "obj", s, load.InsideFolder(lake.Root))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(lake.LakeDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, lake.ObjectDir("obj")); err != nil {
		t.Fatal(err)
	}
	if err := lake.Publish("r2", "obj", day); err == nil {
		t.Error("publish moved a partition through a symlink leading out of the output folder")
	}
	if err := lake.Discard("../../../outside"); !errors.Is(err, load.ErrOutside) {
		t.Errorf("discard of a climbing run id: %v, want ErrOutside", err)
	}

	ents, err := os.ReadDir(outside)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("%s was written outside the output folder", e.Name())
	}
	// The good partition is still staged, whole, for the next run.
	if !lake.Staged("r2", "obj", day) {
		t.Error("the refused publish lost the staged partition")
	}
}

// TestClearScratch: a run clears the scratch folder a dead process left
// (a spill file the system could not unlink at once), and only inside
// the output folder: a symlink planted there goes, what it points at
// stays.
func TestClearScratch(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	lake := load.Lake{Root: filepath.Join(parent, "out")}
	if err := lake.ClearScratch(); err != nil {
		t.Fatalf("no output folder yet: %v", err)
	}
	if err := os.Mkdir(lake.Root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := lake.ClearScratch(); err != nil {
		t.Fatalf("no scratch folder yet: %v", err)
	}
	// A scratch file: its folder made, the file already unlinked, usable.
	f, err := lake.CreateScratch()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("keys"); err != nil {
		t.Fatal(err)
	}
	var b [4]byte
	if _, err := f.ReadAt(b[:], 0); err != nil || string(b[:]) != "keys" {
		t.Fatalf("read back %q, %v", b, err)
	}
	f.Close()
	if ents, err := os.ReadDir(lake.ScratchDir()); err != nil || (len(ents) != 0 && runtime.GOOS != "windows") {
		t.Fatalf("scratch folder holds %v (%v): want the file unlinked at once", ents, err)
	}
	left := filepath.Join(lake.ScratchDir(), "sepipe-keys-1.spill")
	if err := os.WriteFile(left, []byte("keys"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := lake.ClearScratch(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(lake.ScratchDir()); !os.IsNotExist(err) {
		t.Fatalf("scratch folder after ClearScratch: %v", err)
	}
	outside := filepath.Join(parent, "outside")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	keep := filepath.Join(outside, "keep")
	if err := os.WriteFile(keep, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, lake.ScratchDir()); err != nil {
		t.Fatal(err)
	}
	if _, err := lake.CreateScratch(); err == nil {
		t.Error("a scratch file was made through a symlink leading out of the output folder")
	}
	if err := lake.ClearScratch(); err != nil {
		t.Fatal(err)
	}
	if ents, err := os.ReadDir(outside); err != nil || len(ents) != 1 {
		t.Fatalf("outside the output folder: %v, %v; want keep alone", ents, err)
	}
}
