package lakehouse

import (
	"bufio"
	"context"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/sepipe/sepipe/lakefile"
)

// keyBounds is the smallest and largest value of one key column, for
// pruning files by their statistics (only int and string keys).
type keyBounds struct {
	col      string
	min, max any // int64, int32 or string; nil when the type is not pruned on
}

// readKeys reads the primary key of every row of the intent's files.
func readKeys(ctx context.Context, fsys icebergio.IO, files, key []string, mem memory.Allocator) (map[string]struct{}, []keyBounds, error) {
	keys := map[string]struct{}{}
	bounds := make([]keyBounds, len(key))
	for i, k := range key {
		bounds[i].col = k
	}
	for _, p := range files {
		if err := readFileKeys(ctx, fsys, p, key, mem, keys, bounds); err != nil {
			return nil, nil, fmt.Errorf("read keys of %s: %w", p, err)
		}
	}
	return keys, bounds, nil
}

func readFileKeys(ctx context.Context, fsys icebergio.IO, p string, key []string, mem memory.Allocator, keys map[string]struct{}, bounds []keyBounds) error {
	f, err := fsys.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	pf, err := file.NewParquetReader(f)
	if err != nil {
		return err
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 64 << 10}, mem)
	if err != nil {
		return err
	}
	sc, err := fr.Schema()
	if err != nil {
		return err
	}
	idx := make([]int, len(key))
	for i, k := range key {
		ix := sc.FieldIndices(k)
		if len(ix) == 0 {
			return fmt.Errorf("no key column %q", k)
		}
		idx[i] = ix[0]
	}
	rr, err := fr.GetRecordReader(ctx, idx, nil)
	if err != nil {
		return err
	}
	defer rr.Release()
	for rr.Next() {
		rec := rr.RecordBatch()
		cols := rec.Columns()
		for r := range int(rec.NumRows()) {
			k, _ := keyOf(cols, r)
			keys[k] = struct{}{}
		}
		for i, c := range cols {
			widen(&bounds[i], c)
		}
	}
	return rr.Err()
}

// widen extends b by the values of c.
func widen(b *keyBounds, c arrow.Array) {
	for r := range c.Len() {
		if c.IsNull(r) {
			continue
		}
		switch c := c.(type) {
		case *array.Int64:
			v := c.Value(r)
			if b.min == nil || v < b.min.(int64) {
				b.min = v
			}
			if b.max == nil || v > b.max.(int64) {
				b.max = v
			}
		case *array.Int32:
			v := c.Value(r)
			if b.min == nil || v < b.min.(int32) {
				b.min = v
			}
			if b.max == nil || v > b.max.(int32) {
				b.max = v
			}
		case *array.String:
			v := c.Value(r)
			if b.min == nil || v < b.min.(string) {
				b.min = strings.Clone(v)
			}
			if b.max == nil || v > b.max.(string) {
				b.max = strings.Clone(v)
			}
		default:
			return
		}
	}
}

// boundsFilter keeps files whose statistics may hold one of the keys.
func boundsFilter(bounds []keyBounds) iceberg.BooleanExpression {
	var preds []iceberg.BooleanExpression
	for _, b := range bounds {
		ref := iceberg.Reference(b.col)
		switch lo := b.min.(type) {
		case int64:
			preds = append(preds, iceberg.GreaterThanEqual(ref, lo), iceberg.LessThanEqual(ref, b.max.(int64)))
		case int32:
			preds = append(preds, iceberg.GreaterThanEqual(ref, lo), iceberg.LessThanEqual(ref, b.max.(int32)))
		case string:
			preds = append(preds, iceberg.GreaterThanEqual(ref, lo), iceberg.LessThanEqual(ref, b.max.(string)))
		}
	}
	switch len(preds) {
	case 0:
		return iceberg.AlwaysTrue{}
	case 1:
		return preds[0]
	}
	return iceberg.NewAnd(preds[0], preds[1], preds[2:]...)
}

// planMerge finds the current snapshot's data files holding a row whose
// key is among the intent's, and rewrites each without those rows (a file
// left empty is only removed): copy-on-write, so the snapshot is readable
// by any engine, with no delete files.
func (l *Lakehouse) planMerge(ctx context.Context, tbl *table.Table, in Intent, p *plan) error {
	name := identString(in.Table)
	fail := func(step string, err error) error { return &TableError{Table: name, Step: "merge: " + step, Err: err} }
	keys, bounds, err := readKeys(ctx, p.fs, in.Files, in.PrimaryKey, l.mem)
	if err != nil {
		return fail("read the run's keys", err)
	}
	if len(keys) == 0 {
		return nil
	}
	tasks, err := tbl.Scan(table.WithRowFilter(boundsFilter(bounds))).PlanFiles(ctx)
	if err != nil {
		return fail("plan files", err)
	}
	// One task per file, whole (planning may split a large file).
	byPath := map[string]table.FileScanTask{}
	var order []string
	for _, t := range tasks {
		pth := t.File.FilePath()
		if _, ok := byPath[pth]; ok {
			continue
		}
		order = append(order, pth)
		byPath[pth] = table.FileScanTask{File: t.File, Start: 0, Length: t.File.FileSizeBytes(),
			DeleteFiles: t.DeleteFiles, EqualityDeleteFiles: t.EqualityDeleteFiles, DeletionVectorFiles: t.DeletionVectorFiles}
	}
	wfs, ok := p.fs.(icebergio.WriteFileIO)
	if !ok {
		return fail("rewrite", fmt.Errorf("the table's file IO cannot write"))
	}
	outSchema, err := table.SchemaToArrowSchema(tbl.Schema(), nil, true, false)
	if err != nil {
		return fail("arrow schema", err)
	}
	// lost tells a data file that is gone from a read that failed.
	lost := func(pth, step string, err error) error {
		if f, oerr := p.fs.Open(pth); isNotExist(oerr) {
			return &TableError{Table: name, Step: "merge: " + step, Path: pth, Err: fmt.Errorf("%w: %v", ErrDataFileLost, err)}
		} else if oerr == nil {
			f.Close()
		}
		return fail(step+" "+pth, err)
	}
	for _, pth := range order {
		task := byPath[pth]
		hit, err := l.fileHasKeys(ctx, tbl, task, in.PrimaryKey, keys)
		if err != nil {
			return lost(pth, "read", err)
		}
		if !hit {
			continue
		}
		p.remove = append(p.remove, pth)
		// Beside the old file, in its partition folder. Not path.Join: it
		// would fold the "//" of s3:// into one slash.
		out := pth[:strings.LastIndex(pth, "/")+1] + fmt.Sprintf("%s-merge-%s.parquet", in.RunID, randomTag())
		kept, err := l.rewriteWithout(ctx, tbl, task, in.PrimaryKey, keys, wfs, out, outSchema)
		if err != nil {
			_ = wfs.Remove(out)
			return lost(pth, "rewrite", err)
		}
		if kept > 0 {
			p.rewritten = append(p.rewritten, out)
		} else {
			_ = wfs.Remove(out)
		}
	}
	return nil
}

// fileHasKeys reads only the key columns of one data file.
func (l *Lakehouse) fileHasKeys(ctx context.Context, tbl *table.Table, task table.FileScanTask, key []string, keys map[string]struct{}) (bool, error) {
	scan := tbl.Scan(table.WithSelectedFields(key...))
	defer scan.Close()
	_, it, err := scan.ReadTasks(ctx, []table.FileScanTask{task})
	if err != nil {
		return false, err
	}
	hit := false
	for rec, err := range it {
		if err != nil {
			return false, err
		}
		if !hit {
			cols := keyColumns(rec, key)
			for r := range int(rec.NumRows()) {
				k, _ := keyOf(cols, r)
				if _, ok := keys[k]; ok {
					hit = true
					break
				}
			}
		}
		rec.Release()
	}
	return hit, nil
}

func keyColumns(rec arrow.RecordBatch, key []string) []arrow.Array {
	cols := make([]arrow.Array, len(key))
	for i, k := range key {
		cols[i] = rec.Column(rec.Schema().FieldIndices(k)[0])
	}
	return cols
}

// rewriteWithout writes the rows of one data file whose key is not in
// keys to out, with the table's current schema and field ids, and
// returns how many it kept.
func (l *Lakehouse) rewriteWithout(ctx context.Context, tbl *table.Table, task table.FileScanTask, key []string,
	keys map[string]struct{}, wfs icebergio.WriteFileIO, out string, outSchema *arrow.Schema,
) (int64, error) {
	scan := tbl.Scan()
	defer scan.Close()
	_, it, err := scan.ReadTasks(ctx, []table.FileScanTask{task})
	if err != nil {
		return 0, err
	}
	f, err := wfs.Create(out)
	if err != nil {
		return 0, err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	fw, err := lakefile.NewFile(bw, outSchema, l.mem, nil)
	if err != nil {
		f.Close()
		return 0, err
	}
	var kept int64
	cctx := compute.WithAllocator(ctx, l.mem)
	werr := func() error {
		for rec, err := range it {
			if err != nil {
				return err
			}
			err = func() error {
				defer rec.Release()
				cols := keyColumns(rec, key)
				mb := array.NewBooleanBuilder(l.mem)
				defer mb.Release()
				mb.Reserve(int(rec.NumRows()))
				for r := range int(rec.NumRows()) {
					k, _ := keyOf(cols, r)
					_, drop := keys[k]
					mb.UnsafeAppend(!drop)
				}
				mask := mb.NewArray()
				defer mask.Release()
				filtered, err := compute.FilterRecordBatch(cctx, rec, mask, compute.DefaultFilterOptions())
				if err != nil {
					return err
				}
				defer filtered.Release()
				if filtered.NumRows() == 0 {
					return nil
				}
				conv, err := conform(cctx, l.mem, filtered, outSchema)
				if err != nil {
					return err
				}
				defer conv.Release()
				kept += conv.NumRows()
				return fw.Write(conv)
			}()
			if err != nil {
				return err
			}
		}
		return nil
	}()
	cerr := fw.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = bw.Flush()
	}
	if err := f.Close(); werr == nil {
		werr = err
	}
	return kept, werr
}

// conform lays rec out as s: columns by name, cast to s's types, missing
// ones null.
func conform(ctx context.Context, mem memory.Allocator, rec arrow.RecordBatch, s *arrow.Schema) (arrow.RecordBatch, error) {
	n := int(rec.NumRows())
	arrs := make([]arrow.Array, s.NumFields())
	defer func() {
		for _, a := range arrs {
			if a != nil {
				a.Release()
			}
		}
	}()
	for i, f := range s.Fields() {
		ix := rec.Schema().FieldIndices(f.Name)
		if len(ix) == 0 {
			arrs[i] = array.MakeArrayOfNull(mem, f.Type, n)
			continue
		}
		a, err := castTo(ctx, mem, rec.Column(ix[0]), f.Type)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", f.Name, err)
		}
		arrs[i] = a
	}
	return array.NewRecordBatch(s, arrs, int64(n)), nil
}
