package load

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sepipe/sepipe/lakefile"
)

// Writer takes the record batches of one object into staged files: the
// load stage as the pipeline sees it. Write does not take ownership of rec
// (the caller still releases it). Close flushes and makes what was written
// durable; Abort removes it instead. Files names what was written, Rows
// counts it. A Writer is not safe for concurrent use.
type Writer interface {
	Write(rec arrow.RecordBatch) error
	Close() error
	Abort()
	Files() []string
	Rows() int64
}

var _ Writer = (*ParquetWriter)(nil)

// ParquetOption configures a ParquetWriter.
type ParquetOption func(*ParquetWriter)

// WithRowsPerFile sets how many rows go into one part file before the next
// is started (default DefaultRowGroupRows, two row groups: a run loads
// each finished file into DuckDB while it still fetches, and what is
// left for the commit is mostly the file each writer has open).
// A file is closed by the first batch that reaches the limit, so it may
// hold a few more rows; it ends sooner at DefaultFileBytes of wide rows.
func WithRowsPerFile(n int64) ParquetOption { return func(w *ParquetWriter) { w.rowsPerFile = n } }

// WithFileDone has fn called with each part file's path once the file is
// complete and synced (a load may read it from then on), from the
// goroutine that called Write or Close.
func WithFileDone(fn func(path string)) ParquetOption {
	return func(w *ParquetWriter) { w.fileDone = fn }
}

// WithRowGroupRows sets the longest Parquet row group (default
// lakefile.RowGroupRows, 61,440: two fill one of DuckDB's). Wide rows get
// shorter ones (lakefile.File).
func WithRowGroupRows(n int64) ParquetOption { return func(w *ParquetWriter) { w.rowGroup = n } }

// DefaultRowGroupRows is DuckDB's own row group length, the rows of a part
// file by default (WithRowsPerFile): two of the format's row groups
// (lakefile.RowGroupRows).
const DefaultRowGroupRows = lakefile.DuckDBRowGroupRows

// DefaultFileBytes bounds a part file's rows as decoded, checked before
// each batch like the rows (WithRowsPerFile). The early load
// (pipeline) loads a file into DuckDB once it is complete, and each
// writer's open file is left for the commit: 122,880 rows of the fake's
// wide object (2.8 KB of JSON, 2.1 KB as decoded) are 260 MB, so a stream
// of 200,000 such rows on two writers finished no file before its last
// page and loaded all of it (5 s) after the fetch. Within 64 MiB a file
// holds 32,000 of those rows; the fake's userCourseProgress rows (142
// bytes) still fill 122,880 rows in 17 MB.
const DefaultFileBytes = 64 << 20

// WithFileNumbers numbers the part files first, first+step, first+2*step,
// ... (default 0, 1, 2, ...), so that several writers can share one folder:
// writer k of n uses WithFileNumbers(k, n).
func WithFileNumbers(first, step int) ParquetOption {
	return func(w *ParquetWriter) { w.firstFile, w.fileStep = first, max(step, 1) }
}

// InsideFolder makes the writer create and remove its files through root
// (the output folder) opened as an os.Root: the writer's folder must lie
// inside it, and no name in its path, "..", or symlink leads outside.
// Without it the root is the writer's own folder.
func InsideFolder(root string) ParquetOption { return func(w *ParquetWriter) { w.root = root } }

// WithParquetAllocator sets the allocator used while encoding.
func WithParquetAllocator(mem memory.Allocator) ParquetOption {
	return func(w *ParquetWriter) { w.mem = mem }
}

// ParquetWriter writes one object's batches as part-NNNNN.parquet files in
// one folder, each encoded by lakefile.File (the one owner of the format:
// zstd, row groups, statistics, the rule for huge values), storing the
// Arrow schema.
type ParquetWriter struct {
	dir         string
	root        string // every file goes through os.OpenRoot(root)
	rel         string // dir relative to root
	object      string
	schema      *arrow.Schema
	rowsPerFile int64
	rowGroup    int64 // the longest row group
	mem         memory.Allocator
	firstFile   int
	fileStep    int
	fileDone    func(path string)

	f        *os.File
	bw       *bufio.Writer
	fw       *lakefile.File
	inCur    int64
	curBytes int64 // the current file's rows as decoded (lakefile.RecordBytes)
	rows     int64
	files    []string
}

// NewParquetWriter creates dir (and parents) and prepares to write batches
// of schema s there. No file exists until the first Write.
func NewParquetWriter(dir, object string, s *arrow.Schema, opts ...ParquetOption) (*ParquetWriter, error) {
	w := &ParquetWriter{dir: dir, object: object, schema: s, rowsPerFile: DefaultRowGroupRows, rowGroup: lakefile.RowGroupRows,
		mem: memory.DefaultAllocator, fileStep: 1}
	for _, o := range opts {
		o(w)
	}
	if w.root == "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, &WriteError{Object: object, Step: "create staging folder", Path: dir, Err: err}
		}
		w.root = dir
	}
	rel, err := Lake{Root: w.root}.within(dir)
	if err != nil {
		return nil, &WriteError{Object: object, Step: "create staging folder", Path: dir, Err: err}
	}
	w.rel = rel
	err = w.inRoot(func(r *os.Root) error { return r.MkdirAll(w.rel, 0o755) })
	if err != nil {
		return nil, &WriteError{Object: object, Step: "create staging folder", Path: dir, Err: err}
	}
	return w, nil
}

// inRoot calls fn with the writer's root opened.
func (w *ParquetWriter) inRoot(fn func(*os.Root) error) error {
	r, err := os.OpenRoot(w.root)
	if err != nil {
		return err
	}
	defer r.Close()
	return fn(r)
}

// open starts the next part file; huge names the columns of a batch
// holding a huge text value (lakefile.HugeColumns), for a file of its own.
func (w *ParquetWriter) open(huge []string) error {
	base := fmt.Sprintf("part-%05d.parquet", w.firstFile+len(w.files)*w.fileStep)
	name := filepath.Join(w.dir, base)
	var f *os.File
	err := w.inRoot(func(r *os.Root) (err error) {
		f, err = r.OpenFile(filepath.Join(w.rel, base), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		return err
	})
	if err != nil {
		return &WriteError{Object: w.object, Step: "create parquet file", Path: name, Err: err}
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	hugeCols := map[string]bool{}
	for _, c := range huge {
		hugeCols[c] = true
	}
	fw, err := lakefile.NewFile(bw, w.schema, w.mem, hugeCols, lakefile.WithStoredSchema(), lakefile.WithRowGroupRows(w.rowGroup))
	if err != nil {
		f.Close()
		w.remove(name)
		return &WriteError{Object: w.object, Step: "start parquet file", Path: name, Err: err}
	}
	w.f, w.bw, w.fw, w.inCur, w.curBytes = f, bw, fw, 0, 0
	w.files = append(w.files, name)
	return nil
}

// Write appends rec to the current part file, starting a new file when the
// current one is full. An empty batch writes nothing.
func (w *ParquetWriter) Write(rec arrow.RecordBatch) error {
	if rec.NumRows() == 0 {
		return nil
	}
	size := lakefile.RecordBytes(rec)
	// A batch holding a huge text value is a file of its own, written
	// without statistics, dictionary or compression of those columns
	// (lakefile.Properties) and finished at once, as the Iceberg lake's
	// writer does: the writer never buffers more than that one batch.
	huge := lakefile.HugeColumns(rec)
	if w.fw != nil && (len(huge) > 0 || w.inCur >= w.rowsPerFile || w.curBytes >= DefaultFileBytes) {
		if err := w.finish(); err != nil {
			return err
		}
	}
	if w.fw == nil {
		if err := w.open(huge); err != nil {
			return err
		}
	}
	if err := w.fw.Write(rec); err != nil {
		return &WriteError{Object: w.object, Step: "parquet write", Path: w.files[len(w.files)-1], Err: err}
	}
	w.inCur += rec.NumRows()
	w.curBytes += size
	w.rows += rec.NumRows()
	if len(huge) > 0 {
		return w.finish()
	}
	return nil
}

func (w *ParquetWriter) finish() error {
	name := w.files[len(w.files)-1]
	fw, bw, f := w.fw, w.bw, w.f
	w.fw, w.bw, w.f = nil, nil, nil
	if err := fw.Close(); err != nil {
		f.Close()
		return &WriteError{Object: w.object, Step: "close parquet file", Path: name, Err: err}
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return &WriteError{Object: w.object, Step: "flush parquet file", Path: name, Err: err}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return &WriteError{Object: w.object, Step: "sync parquet file", Path: name, Err: err}
	}
	if err := f.Close(); err != nil {
		return &WriteError{Object: w.object, Step: "close parquet file", Path: name, Err: err}
	}
	if w.fileDone != nil {
		w.fileDone(name)
	}
	return nil
}

// Close finishes the current file. An object with no rows gets one empty
// file, so that its partition exists and its schema is readable.
func (w *ParquetWriter) Close() error {
	if w.fw == nil && len(w.files) == 0 {
		if err := w.open(nil); err != nil {
			return err
		}
	}
	if w.fw == nil {
		return nil
	}
	return w.finish()
}

// Abort closes and removes whatever was written.
func (w *ParquetWriter) Abort() {
	if w.fw != nil {
		w.fw.Close()
		w.f.Close()
		w.fw, w.bw, w.f = nil, nil, nil
	}
	for _, f := range w.files {
		w.remove(f)
	}
}

// remove removes one of the writer's files (a path under w.dir).
func (w *ParquetWriter) remove(name string) {
	_ = w.inRoot(func(r *os.Root) error { return r.Remove(filepath.Join(w.rel, filepath.Base(name))) })
}

// Files lists the part files written, in order.
func (w *ParquetWriter) Files() []string { return append([]string(nil), w.files...) }

// Rows is the number of rows written.
func (w *ParquetWriter) Rows() int64 { return w.rows }
