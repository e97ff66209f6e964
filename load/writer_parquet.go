package load

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
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

// WithRowGroupRows sets the longest Parquet row group (default half of
// DefaultRowGroupRows, 61,440: two fill one of DuckDB's). Wide rows get
// shorter ones: a row group holds at most DefaultRowGroupBytes of them,
// in half the length, or a quarter, and so on, still dividing DuckDB's.
func WithRowGroupRows(n int64) ParquetOption { return func(w *ParquetWriter) { w.rowGroup = n } }

// DefaultRowGroupRows is DuckDB's own row group size (120 × 1024 rows).
// Parquet row groups of that length load into a DuckDB table as whole row
// groups, written to the database file as they come; other lengths make
// DuckDB re-cut them in memory and write everything at the checkpoint
// (measured with 131,072-row groups: 1 to 2 s more CPU per million rows,
// most of it at the checkpoint). Half of it divides it as well: two
// Parquet row groups fill one of DuckDB's, which is still written as it
// comes (the checkpoint after loading 1 M rows takes 0.01 s either way).
// A row group is buffered in memory, encoded and compressed, until it is
// complete, and DuckDB's reader holds one decompressed: with half as many
// rows, a sync that loads while it fetches peaked at 270-274 MB instead of
// 293-312 MB (1 M rows, merge, 50 requests a second), at the same speed.
const DefaultRowGroupRows = 122_880

// DefaultRowGroupBytes bounds a row group's Arrow data (its rows as
// decoded, about what DuckDB holds of them while it loads them). The
// writer holds a row group, compressed, until it is complete: four
// writers of row groups of 61,440 rows peaked at a live heap of 338 MB
// with rows of about 950 bytes and 1,012 MB with rows of 3,500 (152 and
// 174 MB within this bound). And DuckDB's load reads a row group at a
// time on each thread: rows of 3,500 bytes in row groups of 8,192 (28 MB)
// failed it under the default 64 MB, in row groups of 4,096 (14 MB) they
// passed. The fake's userCourseProgress rows are 142 bytes: row groups of
// 15,360, loaded as fast as row groups of 61,440.
const DefaultRowGroupBytes = 4 << 20

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
// one folder. Files are zstd-compressed and store the Arrow schema.
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

	f          *os.File
	bw         *bufio.Writer
	fw         *pqarrow.FileWriter
	inCur      int64
	curBytes   int64 // the current file's rows as decoded (recordBytes)
	inGroup    int64 // rows in the row group being buffered
	groupBytes int64 // and their bytes as decoded (recordBytes)
	rows       int64
	files      []string
	huge       map[string]bool // text columns that have held a huge value: no statistics, no dictionary
}

// NewParquetWriter creates dir (and parents) and prepares to write batches
// of schema s there. No file exists until the first Write.
func NewParquetWriter(dir, object string, s *arrow.Schema, opts ...ParquetOption) (*ParquetWriter, error) {
	w := &ParquetWriter{dir: dir, object: object, schema: s, rowsPerFile: DefaultRowGroupRows, rowGroup: DefaultRowGroupRows / 2,
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

func (w *ParquetWriter) open() error {
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
	props := parquet.NewWriterProperties(w.writerProps()...)
	aprops := pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema(), pqarrow.WithAllocator(w.mem))
	bw := bufio.NewWriterSize(f, 1<<20)
	fw, err := pqarrow.NewFileWriter(w.schema, bw, props, aprops)
	if err != nil {
		f.Close()
		w.remove(name)
		return &WriteError{Object: w.object, Step: "start parquet file", Path: name, Err: err}
	}
	w.f, w.bw, w.fw, w.inCur, w.curBytes, w.inGroup, w.groupBytes = f, bw, fw, 0, 0, 0, 0
	w.files = append(w.files, name)
	return nil
}

// dataPageSize bounds a data page before compression. A row group is
// buffered until it is complete, and each column's page in progress is
// buffered uncompressed: 64 KiB pages instead of the default 1 MiB keep
// that to about 1 MiB per writer instead of 14, for files of the same size
// and no measurable cost to the writer or to DuckDB reading them.
const dataPageSize = 64 << 10

// writerProps are the Parquet settings of every file. Dictionary encoding
// is on for text columns only (strings and picklists, whose values repeat);
// numbers and dates are plain-encoded and left to zstd: hashing every
// int64, float and timestamp into a dictionary cost more CPU than all the
// rest of the encoding, for files about as small.
func (w *ParquetWriter) writerProps() []parquet.WriterProperty {
	props := []parquet.WriterProperty{
		parquet.WithCompression(compress.Codecs.Zstd),
		parquet.WithCompressionLevel(1),
		parquet.WithMaxRowGroupLength(w.rowGroup),
		parquet.WithDataPageSize(dataPageSize),
		parquet.WithDictionaryDefault(false),
		parquet.WithStats(true),
		parquet.WithAllocator(w.mem),
		parquet.WithCreatedBy("sepipe"),
	}
	for _, f := range w.schema.Fields() {
		switch {
		case w.huge[f.Name]:
			// Statistics and dictionaries copy values; for values of
			// megabytes they cost gigabytes and help no reader. zstd would
			// reserve its worst-case bound beside each page: one more copy
			// of the value.
			props = append(props, parquet.WithStatsFor(f.Name, false), parquet.WithDictionaryFor(f.Name, false),
				parquet.WithCompressionFor(f.Name, compress.Codecs.Uncompressed))
		case f.Type.ID() == arrow.STRING, f.Type.ID() == arrow.LARGE_STRING, f.Type.ID() == arrow.DICTIONARY:
			props = append(props, parquet.WithDictionaryFor(f.Name, true))
		}
	}
	return props
}

// hugeValue: a text value this long turns its column's statistics and
// dictionary off (from the next part file on).
const hugeValue = 1 << 20

// newHuge reports the text columns of rec that hold a huge value for the
// first time.
func (w *ParquetWriter) newHuge(rec arrow.RecordBatch) []string {
	var out []string
	for i, f := range w.schema.Fields() {
		if w.huge[f.Name] {
			continue
		}
		col, ok := rec.Column(i).(*array.String)
		if !ok {
			continue
		}
		offs := col.ValueOffsets()
		for j := 1; j < len(offs); j++ {
			if offs[j]-offs[j-1] >= hugeValue {
				out = append(out, f.Name)
				break
			}
		}
	}
	return out
}

// Write appends rec to the current part file, starting a new file when the
// current one is full. An empty batch writes nothing.
func (w *ParquetWriter) Write(rec arrow.RecordBatch) error {
	if rec.NumRows() == 0 {
		return nil
	}
	size := recordBytes(rec)
	rotate := w.fw != nil && (w.inCur >= w.rowsPerFile || w.curBytes >= DefaultFileBytes)
	if cols := w.newHuge(rec); len(cols) > 0 {
		if w.huge == nil {
			w.huge = map[string]bool{}
		}
		for _, c := range cols {
			w.huge[c] = true
		}
		rotate = w.fw != nil // the next file is written without their statistics
	}
	if rotate {
		if err := w.finish(); err != nil {
			return err
		}
	}
	if w.fw == nil {
		if err := w.open(); err != nil {
			return err
		}
	}
	var err error
	if len(w.huge) > 0 {
		// A batch with huge values is a row group of its own: a reader
		// (DuckDB's load) then holds one such batch at a time.
		err = w.fw.Write(rec)
	} else {
		err = w.buffer(rec, size)
	}
	if err != nil {
		return &WriteError{Object: w.object, Step: "parquet write", Path: w.files[len(w.files)-1], Err: err}
	}
	w.inCur += rec.NumRows()
	w.curBytes += size
	w.rows += rec.NumRows()
	return nil
}

// buffer adds rec, of size bytes as decoded, to the row groups being
// buffered, in row groups of the length groupRows gives its rows: a row
// group that has reached it, or would pass DefaultRowGroupBytes with more
// of them (rows wider than the ones before), is complete, and the batch is
// cut where the row group ends.
func (w *ParquetWriter) buffer(rec arrow.RecordBatch, size int64) error {
	n := rec.NumRows()
	rowBytes := max(size/n, 1)
	goal := groupRows(w.rowGroup, rowBytes, DefaultRowGroupBytes)
	for off := int64(0); off < n; {
		k := min(goal-w.inGroup, n-off)
		if w.inGroup > 0 {
			k = min(k, (DefaultRowGroupBytes-w.groupBytes)/rowBytes)
		}
		if k <= 0 {
			if err := w.fw.NewBufferedRowGroupChecked(); err != nil {
				return err
			}
			w.inGroup, w.groupBytes = 0, 0
			continue
		}
		part := rec
		if k < n {
			part = rec.NewSlice(off, off+k)
		}
		err := w.fw.WriteBuffered(part)
		if k < n {
			part.Release()
		}
		if err != nil {
			return err
		}
		w.inGroup += k
		w.groupBytes += k * rowBytes
		off += k
	}
	return nil
}

// groupRows is the length of a row group of rows of rowBytes each: the
// longest, halved while its rows would hold more than maxBytes (down to
// one row). Halves of DuckDB's row group still divide it.
func groupRows(longest, rowBytes, maxBytes int64) int64 {
	l := longest
	for l > 1 && l*rowBytes > maxBytes {
		l /= 2
	}
	return l
}

// recordBytes is the size of rec's buffers: its rows' bytes as decoded.
// A slice counts its parent's whole buffers; the sync writes the batches
// its decoder makes, never slices.
func recordBytes(rec arrow.RecordBatch) int64 {
	var n int64
	for _, c := range rec.Columns() {
		n += dataBytes(c.Data())
	}
	return n
}

func dataBytes(d arrow.ArrayData) int64 {
	var n int64
	for _, b := range d.Buffers() {
		if b != nil {
			n += int64(b.Len())
		}
	}
	for _, c := range d.Children() {
		n += dataBytes(c)
	}
	if d.DataType().ID() == arrow.DICTIONARY {
		n += dataBytes(d.Dictionary())
	}
	return n
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
		if err := w.open(); err != nil {
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
