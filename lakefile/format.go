package lakefile

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
)

// RowGroupRows is the longest row group of a data file: half of DuckDB's
// own row group (120 × 1024 rows). Parquet row groups that divide DuckDB's
// load into a DuckDB table as whole row groups, written to the database
// file as they come; other lengths make DuckDB re-cut them in memory and
// write everything at the checkpoint (measured with 131,072-row groups: 1
// to 2 s more CPU per million rows, most of it at the checkpoint). A row
// group is buffered in memory, encoded and compressed, until it is
// complete, and DuckDB's reader holds one decompressed: at half of
// DuckDB's length a sync that loads while it fetches peaked at 270-274 MB
// instead of 293-312 MB (1 M rows, merge, 50 requests a second), at the
// same speed.
const RowGroupRows int64 = 61_440

// DuckDBRowGroupRows is DuckDB's own row group length, which RowGroupRows
// and its halves divide.
const DuckDBRowGroupRows int64 = 122_880

// RowGroupBytes bounds a row group's Arrow data (its rows as decoded,
// about what DuckDB holds of them while it loads them): wide rows get
// shorter row groups (GroupRows). A writer holds a row group, compressed,
// until it is complete: four writers of row groups of 61,440 rows peaked
// at a live heap of 338 MB with rows of about 950 bytes and 1,012 MB with
// rows of 3,500 (152 and 174 MB within this bound). And DuckDB's load
// reads a row group at a time on each thread: rows of 3,500 bytes in row
// groups of 8,192 (28 MB) failed it under the default 64 MB, in row groups
// of 4,096 (14 MB) they passed.
const RowGroupBytes int64 = 4 << 20

// DataPageSize bounds a data page before compression. Each column's page
// in progress is buffered uncompressed: 64 KiB pages instead of the
// default 1 MiB keep that to about 1 MiB per writer instead of 14, for
// files of the same size and no measurable cost to the writer or to
// DuckDB reading them.
const DataPageSize = 64 << 10

// HugeValue is the length of a text value from which its column is
// written without statistics, dictionary or compression (Properties), in
// a row group of its own (File.Write): statistics and dictionaries copy
// values, and for values of megabytes they cost gigabytes and help no
// reader; zstd would reserve its worst-case bound beside each page, one
// more copy of the value.
const HugeValue = 1 << 20

// IsText reports whether a column of Arrow type dt holds text of any
// length: strings, a picklist's dictionary of strings, JSON (an extension
// type over strings).
func IsText(dt arrow.DataType) bool {
	switch t := dt.(type) {
	case *arrow.StringType, *arrow.LargeStringType:
		return true
	case *arrow.DictionaryType:
		return IsText(t.ValueType)
	case arrow.ExtensionType:
		return IsText(t.StorageType())
	}
	return false
}

// Properties are the Parquet properties of a data file of schema s: zstd
// (level 1), pages of DataPageSize, row groups of at most RowGroupRows,
// statistics on; dictionary encoding for text columns only (their values
// repeat; numbers and dates are plain-encoded and left to zstd: hashing
// every int64, float and timestamp into a dictionary cost more CPU than
// all the rest of the encoding, for files about as small). The columns
// named in huge hold a value of HugeValue bytes or more: no statistics,
// no dictionary, no compression.
func Properties(s *arrow.Schema, mem memory.Allocator, huge map[string]bool) *parquet.WriterProperties {
	props := []parquet.WriterProperty{
		parquet.WithCompression(compress.Codecs.Zstd),
		parquet.WithCompressionLevel(1),
		parquet.WithMaxRowGroupLength(RowGroupRows),
		parquet.WithDataPageSize(DataPageSize),
		parquet.WithDictionaryDefault(false),
		parquet.WithStats(true),
		parquet.WithAllocator(mem),
		parquet.WithCreatedBy("sepipe"),
	}
	for _, f := range s.Fields() {
		switch {
		case huge[f.Name]:
			props = append(props, parquet.WithStatsFor(f.Name, false), parquet.WithDictionaryFor(f.Name, false),
				parquet.WithCompressionFor(f.Name, compress.Codecs.Uncompressed))
		case IsText(f.Type):
			props = append(props, parquet.WithDictionaryFor(f.Name, true))
		}
	}
	return parquet.NewWriterProperties(props...)
}

// HugeColumns names the text columns of rec holding a value of HugeValue
// bytes or more.
func HugeColumns(rec arrow.RecordBatch) []string {
	var out []string
	for i, f := range rec.Schema().Fields() {
		if IsText(f.Type) && hasHuge(rec.Column(i)) {
			out = append(out, f.Name)
		}
	}
	return out
}

// hasHuge reports whether a text array holds a value of HugeValue bytes
// or more.
func hasHuge(a arrow.Array) bool {
	switch a := a.(type) {
	case array.ExtensionArray:
		return hasHuge(a.Storage())
	case *array.Dictionary:
		return hasHuge(a.Dictionary())
	case *array.String:
		return len(a.ValueBytes()) >= HugeValue && hugeOffsets(a.ValueOffsets())
	case *array.LargeString:
		return len(a.ValueBytes()) >= HugeValue && hugeOffsets(a.ValueOffsets())
	}
	return false
}

// hugeOffsets reports whether a value of a text array's offsets spans
// HugeValue bytes or more.
func hugeOffsets[T int32 | int64](offs []T) bool {
	for j := 1; j < len(offs); j++ {
		if offs[j]-offs[j-1] >= HugeValue {
			return true
		}
	}
	return false
}

// GroupRows is the length of a row group of rows of rowBytes each: the
// longest, halved while its rows would hold more than maxBytes (down to
// one row). Halves of DuckDB's row group still divide it.
func GroupRows(longest, rowBytes, maxBytes int64) int64 {
	l := longest
	for l > 1 && l*rowBytes > maxBytes {
		l /= 2
	}
	return l
}

// RecordBytes is the size of rec's buffers: its rows' bytes as decoded.
// A slice counts its parent's whole buffers; the writers write the
// batches a decoder makes, never slices.
func RecordBytes(rec arrow.RecordBatch) int64 {
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
