package load

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sepipe/sepipe/internal/faults"
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

// ScratchDir is where a run keeps scratch files that are not data: the
// row keys a long read spills (CreateScratch).
func (l Lake) ScratchDir() string { return filepath.Join(l.Root, ".sepipe", "tmp") }

// CreateScratch creates a new file of a name no other has in ScratchDir,
// through the output folder as an os.Root, and unlinks it at once where
// the system allows (where it refuses, older Windows or a FAT volume,
// ClearScratch removes what is left),
// so that it is gone with the process however that ends. It is what
// extract.WithSpillFiles wants.
func (l Lake) CreateScratch() (*os.File, error) {
	var b [8]byte
	rand.Read(b[:])
	path := filepath.Join(l.ScratchDir(), "scratch-"+hex.EncodeToString(b[:]))
	f, err := l.create(path, os.O_RDWR|os.O_EXCL)
	if err != nil {
		return nil, fmt.Errorf("create scratch file %s: %w", path, err)
	}
	_ = l.removeAll(path) // refused by some systems while open
	return f, nil
}

// ClearScratch removes ScratchDir and what it holds: a spill file that
// outlived its process where the system could not unlink it at once.
// Only the run holding the output folder may call it.
func (l Lake) ClearScratch() error { return l.removeAll(l.ScratchDir()) }

func (l Lake) stagingRoot() string { return filepath.Join(l.Root, ".sepipe", "staging") }

// Publish moves a staged partition into the lake, replacing the partition
// of the same object and date if there is one. Each step is a rename, so
// the lake holds the old or the new partition at every instant but the
// short gap between two renames in the same folder. Every step goes
// through the output folder as an os.Root (see within).
func (l Lake) Publish(run, object, date string) error {
	r, err := l.open()
	if err != nil {
		return &WriteError{Object: object, Step: "publish", Path: l.Root, Err: err}
	}
	defer r.Close()
	staged, final, old := l.StagingDir(run, object, date), l.PartitionDir(object, date), l.replacedDir(run, object, date)
	rel, err := l.locals(staged, final, old)
	if err != nil {
		return &WriteError{Object: object, Step: "publish", Path: final, Err: err}
	}
	rs, rf, ro := rel[0], rel[1], rel[2]
	if err := r.MkdirAll(filepath.Dir(rf), 0o755); err != nil {
		return &WriteError{Object: object, Step: "publish", Path: final, Err: err}
	}
	hadOld := false
	if _, err := r.Stat(rf); err == nil {
		if err := r.MkdirAll(filepath.Dir(ro), 0o755); err != nil {
			return &WriteError{Object: object, Step: "publish (set aside old partition)", Path: old, Err: err}
		}
		if err := r.Rename(rf, ro); err != nil {
			return &WriteError{Object: object, Step: "publish (set aside old partition)", Path: final, Err: err}
		}
		hadOld = true
		faults.At(faults.SetAside, object)
	}
	if err := r.Rename(rs, rf); err != nil {
		if hadOld {
			_ = r.Rename(ro, rf) // put the old partition back
		}
		return &WriteError{Object: object, Step: "publish", Path: final, Err: err}
	}
	syncDir(filepath.Dir(final))
	if hadOld {
		if err := r.RemoveAll(ro); err != nil {
			return &WriteError{Object: object, Step: "publish (remove old partition)", Path: old, Err: err}
		}
		// Its object's and run's folders too, once empty: a run's other
		// objects may still set theirs aside there (Remove refuses a
		// folder that is not empty).
		_ = r.Remove(filepath.Dir(ro))
		_ = r.Remove(filepath.Dir(filepath.Dir(ro)))
	}
	return nil
}

// Discard removes a run's staging folder.
func (l Lake) Discard(run string) error {
	return l.removeAll(filepath.Join(l.stagingRoot(), run))
}

// ErrOutside is wrapped when a path sepipe was about to write, built from
// names that came from the service or a run, would lead outside the output
// folder (a "..", an absolute path, or a symlink pointing out of it).
var ErrOutside = errors.New("leads outside the output folder")

// within returns path relative to the output folder, or an error wrapping
// ErrOutside when it does not lie inside it. Every file sepipe writes in
// an output folder goes through the folder opened as an os.Root with such
// a path, so no name can reach outside it, by its text or by a symlink.
func (l Lake) within(path string) (string, error) {
	rel, err := filepath.Rel(l.base(), path)
	if err != nil || !filepath.IsLocal(rel) {
		return "", fmt.Errorf("%s: %w %s", path, ErrOutside, l.base())
	}
	return rel, nil
}

func (l Lake) open() (*os.Root, error) { return os.OpenRoot(l.base()) }

func (l Lake) base() string {
	if l.Root == "" {
		return "."
	}
	return l.Root
}

// locals is within for several paths.
func (l Lake) locals(paths ...string) ([]string, error) {
	out := make([]string, len(paths))
	for i, p := range paths {
		rel, err := l.within(p)
		if err != nil {
			return nil, err
		}
		out[i] = rel
	}
	return out, nil
}

// removeAll removes path (inside the output folder) through the os.Root.
func (l Lake) removeAll(path string) error {
	rel, err := l.within(path)
	if err != nil {
		return err
	}
	r, err := l.open()
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	defer r.Close()
	return r.RemoveAll(rel)
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
	if err := CheckOutputPath(l.Root); err != nil {
		return err
	}
	if err := os.MkdirAll(l.Root, 0o755); err != nil {
		return fmt.Errorf("output folder %s: %w", l.Root, err)
	}
	if err := CheckDirWritable(l.Root); err != nil {
		return fmt.Errorf("output folder %s is not writable: %w", l.Root, err)
	}
	return nil
}

// CheckDirWritable proves a file can be created in dir now (and removes
// it): a run's output folder before any request, a listener's spool and
// folder for a readiness probe.
func CheckDirWritable(dir string) error {
	f, err := os.CreateTemp(dir, ".sepipe-write-test-*")
	if err != nil {
		return err
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// ErrUnsafePath is wrapped when an output folder's path holds a character
// DuckDB reads as syntax in the paths sepipe gives it: glob characters
// (* ? [ ] { }) make read_parquet match other files, and ? starts the
// connection options of a database path.
var ErrUnsafePath = errors.New("the output folder's path holds a character DuckDB reads as syntax")

// CheckOutputPath refuses an output folder whose absolute path holds a
// character of ErrUnsafePath, naming it.
func CheckOutputPath(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("output folder %s: %w", dir, err)
	}
	if i := strings.IndexAny(abs, "*?[]{}"); i >= 0 {
		return fmt.Errorf("output folder %s: %w: %q (choose a folder without * ? [ ] { })", abs, ErrUnsafePath, abs[i])
	}
	return nil
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

// DiscardAll removes every run's staging folder. Call it only while
// holding the output folder's lock.
func (l Lake) DiscardAll() error { return l.removeAll(l.stagingRoot()) }

// ObjectDir is the folder of all of an object's partitions.
func (l Lake) ObjectDir(object string) string { return filepath.Join(l.LakeDir(), object) }

// Staged reports whether a run's staging for an object and date exists.
func (l Lake) Staged(run, object, date string) bool {
	_, err := os.Stat(l.StagingDir(run, object, date))
	return err == nil
}

// replacedDir is where Publish sets the old partition aside while it
// renames the new one in: outside the lake, so lake readers never see it.
func (l Lake) replacedDir(run, object, date string) string {
	return filepath.Join(l.Root, ".sepipe", "replaced", run, object, "snapshot_date="+date)
}

// Repair finishes or undoes what a dead publish left: a partition set
// aside is removed when its replacement is in place, and put back when it
// is not.
func (l Lake) Repair() error {
	root := filepath.Join(l.Root, ".sepipe", "replaced")
	runs, err := os.ReadDir(root)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	r, err := l.open()
	if err != nil {
		return err
	}
	defer r.Close()
	for _, run := range runs {
		objs, err := os.ReadDir(filepath.Join(root, run.Name()))
		if err != nil {
			return err
		}
		for _, o := range objs {
			parts, err := os.ReadDir(filepath.Join(root, run.Name(), o.Name()))
			if err != nil {
				return err
			}
			for _, p := range parts {
				rel, err := l.locals(filepath.Join(root, run.Name(), o.Name(), p.Name()),
					filepath.Join(l.LakeDir(), o.Name(), p.Name()))
				if err != nil {
					return err
				}
				old, final := rel[0], rel[1]
				if _, err := r.Stat(final); err == nil {
					if err := r.RemoveAll(old); err != nil {
						return err
					}
				} else if err := r.Rename(old, final); err != nil {
					return err
				}
			}
		}
	}
	return l.removeAll(root)
}

// SpoolPath is where a run keeps the raw pages of a collection while it
// reads them (a collection whose items call for a wider schema than its
// first pages is decoded again from them). It lies in the run's staging,
// so a discarded or dead run leaves none behind.
func (l Lake) SpoolPath(run, object string) string {
	return filepath.Join(l.stagingRoot(), run, ".spool", object)
}

// CreateSpool creates (or empties) the spool file of a run's collection,
// through the output folder as an os.Root.
func (l Lake) CreateSpool(run, object string) (*os.File, error) {
	path := l.SpoolPath(run, object)
	f, err := l.create(path, os.O_RDWR)
	if err != nil {
		return nil, &WriteError{Object: object, Step: "create spool", Path: path, Err: err}
	}
	return f, nil
}

// create creates (or empties) the file path inside the output folder, and
// its folders, through the folder opened as an os.Root; flag adds to
// O_CREATE|O_TRUNC how the file is opened.
func (l Lake) create(path string, flag int) (*os.File, error) {
	rel, err := l.within(path)
	if err != nil {
		return nil, err
	}
	r, err := l.open()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if err := r.MkdirAll(filepath.Dir(rel), 0o755); err != nil {
		return nil, err
	}
	return r.OpenFile(rel, os.O_CREATE|os.O_TRUNC|flag, 0o644)
}

// RawValuesFolder is the folder, inside a partition, of the values too
// long for the warehouse (see WriteRawValue). Readers of the lake's
// part-*.parquet files do not see it.
const RawValuesFolder = "raw-values"

// WriteRawValue keeps one value too long for the warehouse: b, as the
// service sent it, in the file name of the run's staged partition of
// object, made durable. It returns where the file will be once the
// partition is published, relative to the output folder (what
// _sepipe_rejects.raw_value_file records).
func (l Lake) WriteRawValue(run, object, date, name string, b []byte) (string, error) {
	path := filepath.Join(l.StagingDir(run, object, date), RawValuesFolder, name)
	fail := func(err error) (string, error) {
		return "", &WriteError{Object: object, Step: "keep a value too long for the warehouse", Path: path, Err: err}
	}
	f, err := l.create(path, os.O_WRONLY)
	if err != nil {
		return fail(err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fail(err)
	}
	if err := f.Close(); err != nil {
		return fail(err)
	}
	final, err := filepath.Rel(l.base(), filepath.Join(l.PartitionDir(object, date), RawValuesFolder, name))
	if err != nil {
		return fail(err)
	}
	return filepath.ToSlash(final), nil
}

// DropRawValues removes the values a run kept for object so far (its read
// starts again).
func (l Lake) DropRawValues(run, object, date string) error {
	return l.removeAll(filepath.Join(l.StagingDir(run, object, date), RawValuesFolder))
}
