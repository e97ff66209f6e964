package lakefile

import (
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// File encodes one Parquet data file by the format (Properties): batches
// are buffered into row groups of at most RowGroupRows rows and
// RowGroupBytes bytes (shorter for wide rows, GroupRows), and a batch
// holding a huge text value is a row group of its own, so that a reader
// holds one such batch at a time. It writes to the io.Writer it is given
// (the caller opens, syncs and closes the file). Not safe for concurrent
// use.
type File struct {
	fw         *pqarrow.FileWriter
	longest    int64
	inGroup    int64 // rows in the row group being buffered
	groupBytes int64 // and their bytes as decoded (RecordBytes)
	rows       int64
}

// FileOption configures a File.
type FileOption func(*fileOptions)

type fileOptions struct {
	storeSchema bool
	rowGroup    int64
}

// WithStoredSchema stores the Arrow schema in the file's metadata
// (pqarrow.WithStoreSchema), so a reader gets sepipe's field metadata back.
func WithStoredSchema() FileOption { return func(o *fileOptions) { o.storeSchema = true } }

// WithRowGroupRows sets the longest row group (default RowGroupRows): a
// test of many row groups from a few rows.
func WithRowGroupRows(n int64) FileOption { return func(o *fileOptions) { o.rowGroup = max(n, 1) } }

// NewFile starts a data file of schema s on w; the columns named in huge
// hold huge values (Properties).
func NewFile(w io.Writer, s *arrow.Schema, mem memory.Allocator, huge map[string]bool, opts ...FileOption) (*File, error) {
	o := fileOptions{rowGroup: RowGroupRows}
	for _, opt := range opts {
		opt(&o)
	}
	aopts := []pqarrow.WriterOption{pqarrow.WithAllocator(mem)}
	if o.storeSchema {
		aopts = append(aopts, pqarrow.WithStoreSchema())
	}
	fw, err := pqarrow.NewFileWriter(s, w, Properties(s, mem, huge), pqarrow.NewArrowWriterProperties(aopts...))
	if err != nil {
		return nil, err
	}
	return &File{fw: fw, longest: o.rowGroup}, nil
}

// Write adds rec to the file: into the row groups being buffered, cut
// where a row group is complete; or, when rec holds a huge text value, as
// a row group of its own. The rows' size is rec's as it is
// (RecordBytes).
func (f *File) Write(rec arrow.RecordBatch) error { return f.WriteSized(rec, RecordBytes(rec)) }

// WriteSized is Write of rec whose rows are decoded bytes in all: the
// size of the batch the stream decoded, of which rec may be a conversion
// (the Iceberg lake's columns), so that both lakes cut the same rows into
// the same row groups.
func (f *File) WriteSized(rec arrow.RecordBatch, decoded int64) error {
	n := rec.NumRows()
	if n == 0 {
		return nil
	}
	if len(HugeColumns(rec)) > 0 {
		if err := f.fw.Write(rec); err != nil {
			return err
		}
		f.inGroup, f.groupBytes = 0, 0
		f.rows += n
		return nil
	}
	rowBytes := max(decoded/n, 1)
	goal := GroupRows(f.longest, rowBytes, RowGroupBytes)
	for off := int64(0); off < n; {
		k := min(goal-f.inGroup, n-off)
		if f.inGroup > 0 {
			k = min(k, (RowGroupBytes-f.groupBytes)/rowBytes)
		}
		if k <= 0 {
			if err := f.fw.NewBufferedRowGroupChecked(); err != nil {
				return err
			}
			f.inGroup, f.groupBytes = 0, 0
			continue
		}
		part := rec
		if k < n {
			part = rec.NewSlice(off, off+k)
		}
		err := f.fw.WriteBuffered(part)
		if k < n {
			part.Release()
		}
		if err != nil {
			return err
		}
		f.inGroup += k
		f.groupBytes += k * rowBytes
		off += k
	}
	f.rows += n
	return nil
}

// Rows is the number of rows written.
func (f *File) Rows() int64 { return f.rows }

// Close writes the buffered row group and the footer (it does not close
// the io.Writer).
func (f *File) Close() error { return f.fw.Close() }
