package load

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Lake is the layout of an output folder:
//
//	<Root>/lake/<object>/snapshot_date=<date>/part-NNNNN.parquet
//	<Root>/warehouse.duckdb
//	<Root>/.sepipe/staging/<run>/<object>/snapshot_date=<date>/...
type Lake struct {
	Root string
}

// LakeDir is the folder of the Parquet lake.
func (l Lake) LakeDir() string { return filepath.Join(l.Root, "lake") }

// WarehousePath is the DuckDB file.
func (l Lake) WarehousePath() string { return filepath.Join(l.Root, "warehouse.duckdb") }

// PartitionDir is where an object's partition for date lives once published.
func (l Lake) PartitionDir(object, date string) string {
	return filepath.Join(l.LakeDir(), object, "snapshot_date="+date)
}

// StagingDir is where a run writes an object's partition before publishing.
func (l Lake) StagingDir(run, object, date string) string {
	return filepath.Join(l.stagingRoot(), run, object, "snapshot_date="+date)
}

func (l Lake) stagingRoot() string { return filepath.Join(l.Root, ".sepipe", "staging") }

// Publish moves a staged partition into the lake, replacing the partition
// of the same object and date if there is one. Each step is a rename, so
// the lake holds the old or the new partition at every instant but the
// short gap between two renames in the same folder.
func (l Lake) Publish(run, object, date string) error {
	staged := l.StagingDir(run, object, date)
	final := l.PartitionDir(object, date)
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return &WriteError{Object: object, Step: "publish", Path: final, Err: err}
	}
	old := filepath.Join(filepath.Dir(final), ".replaced-"+run+"-snapshot_date="+date)
	hadOld := false
	if _, err := os.Stat(final); err == nil {
		if err := os.Rename(final, old); err != nil {
			return &WriteError{Object: object, Step: "publish (set aside old partition)", Path: final, Err: err}
		}
		hadOld = true
	}
	if err := os.Rename(staged, final); err != nil {
		if hadOld {
			_ = os.Rename(old, final) // put the old partition back
		}
		return &WriteError{Object: object, Step: "publish", Path: final, Err: err}
	}
	syncDir(filepath.Dir(final))
	if hadOld {
		if err := os.RemoveAll(old); err != nil {
			return &WriteError{Object: object, Step: "publish (remove old partition)", Path: old, Err: err}
		}
	}
	return nil
}

// Discard removes a run's staging folder.
func (l Lake) Discard(run string) error {
	return os.RemoveAll(filepath.Join(l.stagingRoot(), run))
}

// Partitions lists the snapshot dates published for an object, oldest first.
func (l Lake) Partitions(object string) ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(l.LakeDir(), object))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if d, ok := strings.CutPrefix(e.Name(), "snapshot_date="); ok && e.IsDir() {
			out = append(out, d)
		}
	}
	return out, nil
}

// CheckWritable makes Root (if needed) and proves a file can be created in
// it, so a bad output folder fails before any request is made.
func (l Lake) CheckWritable() error {
	if err := os.MkdirAll(l.Root, 0o755); err != nil {
		return fmt.Errorf("output folder %s: %w", l.Root, err)
	}
	f, err := os.CreateTemp(l.Root, ".sepipe-write-test-*")
	if err != nil {
		return fmt.Errorf("output folder %s is not writable: %w", l.Root, err)
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

// DiscardAll removes every run's staging folder. Call it only while
// holding the output folder's lock.
func (l Lake) DiscardAll() error { return os.RemoveAll(l.stagingRoot()) }
