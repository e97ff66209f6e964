package lakehouse

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/sepipe/sepipe/lakefile"
)

// Mode says how a run's rows go into a stream's table: the write mode
// (lakefile, its one owner).
type Mode = lakefile.WriteMode

// Modes:
//   - Replace: the run's rows replace the table's partition of the run's
//     day (earlier days stay, as the lake's partitions do).
//   - Append: the run's rows, stamped with the day, are added; a rerun on
//     the same day replaces that day's rows instead of adding them twice
//     (the warehouse's append semantics), so on a new day the commit is a
//     pure Iceberg append.
//   - Merge: rows of the table whose primary key is among the run's rows
//     are deleted and the run's rows added, in one snapshot.
const (
	Replace = lakefile.Replace
	Append  = lakefile.Append
	Merge   = lakefile.Merge
)

// TableSpec says which table a run writes and how.
type TableSpec struct {
	// Namespace holds the table ("" is the configured namespace).
	Namespace string
	// Stream is the table's name: the stream's safe name (load.Names).
	Stream string
	// Schema is the stream's Arrow schema for this run, sepipe's source of
	// truth: the table is created from it and evolved to it.
	Schema *arrow.Schema
	Mode   Mode
	// PrimaryKey names the columns that identify a row: required by merge,
	// the table's sort order for any mode.
	PrimaryKey []string
}

// Run identifies the run that writes.
type Run struct {
	ID  string // unique per run; recorded in each snapshot's summary
	Day string // the run's snapshot day, YYYY-MM-DD
}

// Intent is a staged change of one table: the data files a run wrote and
// how they go in. It is what the caller records in its own transactional
// state before Commit, and hands to Reconcile after a crash. It
// marshals to JSON.
type Intent struct {
	Table []string `json:"table"` // namespace, name
	// ParentSnapshotID is the table's current snapshot when the run
	// staged (nil: the table had none). Reconcile reads the snapshot log
	// back to it.
	ParentSnapshotID *int64   `json:"parent_snapshot_id"`
	Files            []string `json:"files"`
	Rows             int64    `json:"rows"`
	Mode             Mode     `json:"mode"`
	Day              string   `json:"day"`
	RunID            string   `json:"run_id"`
	PrimaryKey       []string `json:"primary_key,omitempty"`
	DayColumn        string   `json:"day_column"`
	// Rebuild: the run's rows replace the whole table, every day's, as a
	// full refresh rebuilds the caller's table (whatever Mode says).
	Rebuild bool `json:"rebuild,omitempty"`
}

var (
	dayPattern   = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)
	runIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)
)

func (s TableSpec) check(run Run) error {
	switch {
	case s.Stream == "" || strings.ContainsAny(s.Stream, "./\\\x00"):
		return fmt.Errorf("stream name %q is not a table name", s.Stream)
	case s.Schema == nil:
		return errors.New("no schema")
	case s.Mode != Replace && s.Mode != Append && s.Mode != Merge:
		return fmt.Errorf("unknown mode %q (want replace, append or merge)", s.Mode)
	case s.Mode == Merge && len(s.PrimaryKey) == 0:
		return errors.New("merge needs a primary key")
	case !runIDPattern.MatchString(run.ID):
		return fmt.Errorf("run id %q: want letters, digits, '_', '.', '-'", run.ID)
	}
	if _, err := dayNumber(run.Day); err != nil {
		return err
	}
	for _, k := range s.PrimaryKey {
		if len(s.Schema.FieldIndices(k)) == 0 {
			return fmt.Errorf("primary key field %q is not a field of the stream", k)
		}
	}
	return nil
}

// dayNumber is day (YYYY-MM-DD) as days since 1970-01-01, Iceberg's date.
func dayNumber(day string) (iceberg.Date, error) {
	if !dayPattern.MatchString(day) {
		return 0, fmt.Errorf("day %q: want YYYY-MM-DD", day)
	}
	t, err := time.Parse(time.DateOnly, day)
	if err != nil {
		return 0, fmt.Errorf("day %q: %w", day, err)
	}
	return iceberg.Date(t.Unix() / 86400), nil
}

// StageWriter writes one run's rows of one table as Iceberg data files:
// Parquet by the format the local lake's files have (lakefile.File), every
// column carrying its Iceberg field id, the day and run columns filled in. Write does not take ownership of rec. Close
// finishes the last file and makes the Intent; Abort removes the files.
// It has load.Writer's methods; it is not safe for concurrent use.
type StageWriter struct {
	l      *Lakehouse
	ctx    context.Context
	ident  table.Identifier
	name   string
	spec   TableSpec
	run    Run
	dayCol string
	day    iceberg.Date
	parent *int64
	cols   []column
	schema *arrow.Schema // of the data files
	fs     icebergio.WriteFileIO
	loc    table.LocationProvider
	part   string // partition folder, e.g. snapshot_date=2024-05-01
	tag    string // random, so a staging retried for the same run never reuses a name

	keyIdx []int               // merge: key columns in the stream's schema
	keys   map[string]struct{} // merge: keys seen

	f      icebergio.FileWriter
	bw     *bufio.Writer
	fw     *lakefile.File
	inCur  int64
	rows   int64
	files  []string
	closed bool
}

// NewStageWriter prepares to stage run's rows for spec's table. It
// creates the table if there is none and evolves its schema to
// spec.Schema (new columns, int->long, float->double), committing that
// schema change at once: a schema change adds no snapshot and is harmless
// if the run never commits. A type change Iceberg cannot express is a
// *SchemaChangeError. Nothing is written until the first Write.
func (l *Lakehouse) NewStageWriter(ctx context.Context, spec TableSpec, run Run) (*StageWriter, error) {
	ident := l.Identifier(spec.Namespace, spec.Stream)
	name := identString(ident)
	if err := spec.check(run); err != nil {
		return nil, &TableError{Table: name, Step: "stage", Err: err}
	}
	tbl, err := l.ensureTable(ctx, ident, spec)
	if err != nil {
		return nil, err
	}
	dayCol := tbl.Properties().Get(propDayColumn, DayColumn)
	cols, err := streamColumns(name, spec.Schema, dayCol)
	if err != nil {
		return nil, err
	}
	if tbl, err = l.evolve(ctx, tbl, name, cols); err != nil {
		return nil, err
	}
	fsch, err := fileSchema(tbl.Schema(), cols)
	if err != nil {
		return nil, &TableError{Table: name, Step: "stage: file schema", Err: err}
	}
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return nil, &TableError{Table: name, Step: "stage: open file IO", Err: err}
	}
	wfs, ok := fsys.(icebergio.WriteFileIO)
	if !ok {
		return nil, &TableError{Table: name, Step: "stage", Err: errors.New("the table's file IO cannot write")}
	}
	loc, err := tbl.LocationProvider()
	if err != nil {
		return nil, &TableError{Table: name, Step: "stage: data location", Err: err}
	}
	day, _ := dayNumber(run.Day)
	w := &StageWriter{l: l, ctx: ctx, ident: ident, name: name, spec: spec, run: run, dayCol: dayCol, day: day,
		cols: cols, schema: fsch, fs: wfs, loc: loc, tag: randomTag()}
	if s := tbl.CurrentSnapshot(); s != nil {
		id := s.SnapshotID
		w.parent = &id
	}
	w.part = dayCol + "=" + run.Day
	pspec := tbl.Spec()
	for _, f := range pspec.Fields() {
		w.part = f.Name + "=" + run.Day // the partition's folder, as Iceberg names it
		break
	}
	if spec.Mode == Merge {
		w.keys = map[string]struct{}{}
		for _, k := range spec.PrimaryKey {
			w.keyIdx = append(w.keyIdx, spec.Schema.FieldIndices(k)[0])
		}
	}
	return w, nil
}

func randomTag() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// evolve brings the table's schema to cols with Iceberg's UpdateSchema:
// new columns are added (optional, new field ids), int and float columns
// widened. Existing fields keep their ids. A concurrent schema change by
// another writer is met by reloading and comparing again.
func (l *Lakehouse) evolve(ctx context.Context, tbl *table.Table, name string, cols []column) (*table.Table, error) {
	for attempt := 1; ; attempt++ {
		changes, err := diffSchema(name, cols, tbl.Schema())
		if err != nil || len(changes) == 0 {
			return tbl, err
		}
		txn := tbl.NewTransaction()
		us := txn.UpdateSchema(true, false)
		for _, c := range changes {
			if c.add {
				doc := ""
				for _, col := range cols {
					if col.name == c.name {
						doc = col.doc
					}
				}
				us.AddColumn([]string{c.name}, c.typ, doc, false, nil)
			} else {
				us.UpdateColumn([]string{c.name}, table.ColumnUpdate{FieldType: iceberg.Optional[iceberg.Type]{Val: c.typ, Valid: true}})
			}
		}
		err = us.Commit()
		var next *table.Table
		if err == nil {
			next, err = txn.Commit(ctx)
		}
		if err == nil {
			tbl = next
			continue // compare again: nothing left to do, normally
		}
		fresh, lerr := l.cat.LoadTable(ctx, tbl.Identifier())
		if lerr != nil || attempt >= l.attempts || fresh.Metadata().CurrentSchema().ID == tbl.Schema().ID {
			return nil, &TableError{Table: name, Step: "evolve schema", Err: err}
		}
		tbl = fresh // another writer changed the schema first
	}
}

// Write converts rec to the table's types and appends it to the current
// data file, starting a new one when it is full. An empty batch writes
// nothing. For a merge stream a null or repeated key is a *KeyError.
func (w *StageWriter) Write(rec arrow.RecordBatch) error {
	if w.closed {
		return &TableError{Table: w.name, Step: "stage write", Err: errors.New("writer is closed")}
	}
	if rec.NumRows() == 0 {
		return nil
	}
	if !rec.Schema().Equal(w.spec.Schema) && !sameFields(rec.Schema(), w.spec.Schema) {
		return &TableError{Table: w.name, Step: "stage write", Err: errors.New("batch schema differs from the stream's schema")}
	}
	if w.keys != nil {
		if err := w.checkKeys(rec); err != nil {
			return err
		}
	}
	out, err := w.convert(rec)
	if err != nil {
		return &TableError{Table: w.name, Step: "stage: convert batch", Err: err}
	}
	defer out.Release()
	// A batch holding a huge text value goes into a data file of its own,
	// written without statistics, dictionary or compression of those
	// columns (lakefile.Properties) and closed at once: the writer never
	// buffers more than one such batch.
	huge := lakefile.HugeColumns(out)
	if w.fw != nil && (len(huge) > 0 || w.inCur >= w.l.rowsPerFile) {
		if err := w.finish(); err != nil {
			return err
		}
	}
	if w.fw == nil {
		if err := w.open(huge); err != nil {
			return err
		}
	}
	// Row groups are cut by the stream's rows as decoded, as the local
	// lake's are: the same rows in the same row groups.
	if err := w.fw.WriteSized(out, lakefile.RecordBytes(rec)); err != nil {
		return &TableError{Table: w.name, Step: "write data file", Path: w.files[len(w.files)-1], Err: err}
	}
	w.inCur += out.NumRows()
	w.rows += out.NumRows()
	if len(huge) > 0 {
		return w.finish()
	}
	return nil
}

func sameFields(a, b *arrow.Schema) bool {
	if a.NumFields() != b.NumFields() {
		return false
	}
	for i := range a.NumFields() {
		if a.Field(i).Name != b.Field(i).Name || !arrow.TypeEqual(a.Field(i).Type, b.Field(i).Type) {
			return false
		}
	}
	return true
}

func (w *StageWriter) checkKeys(rec arrow.RecordBatch) error {
	cols := make([]arrow.Array, len(w.keyIdx))
	for i, idx := range w.keyIdx {
		cols[i] = rec.Column(idx)
	}
	for r := range int(rec.NumRows()) {
		k, null := keyOf(cols, r)
		if null {
			return &KeyError{Table: w.name, Key: w.spec.PrimaryKey, Value: k, Reason: "null key"}
		}
		if _, dup := w.keys[k]; dup {
			return &KeyError{Table: w.name, Key: w.spec.PrimaryKey, Value: k, Reason: "duplicate key"}
		}
		w.keys[k] = struct{}{}
	}
	return nil
}

// keyOf renders row r's key; null reports a null among its columns.
// Each value is quoted (strconv.Quote) and a null is the bare word null,
// which no quoted value is, so two keys render alike only when they are
// the same key: joining the raw values with a separator made
// ("x\x00y", "z") and ("x", "y\x00z") one key, and a merge removed the
// other's row.
func keyOf(cols []arrow.Array, r int) (key string, null bool) {
	var b strings.Builder
	for i, c := range cols {
		if i > 0 {
			b.WriteByte(',')
		}
		if c.IsNull(r) {
			null = true
			b.WriteString("null")
			continue
		}
		b.WriteString(strconv.Quote(c.ValueStr(r)))
	}
	return b.String(), null
}

// convert builds the data file's batch: the stream's columns cast to the
// table's types, then the day and run columns.
func (w *StageWriter) convert(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	n := int(rec.NumRows())
	arrs := make([]arrow.Array, len(w.cols))
	defer func() {
		for _, a := range arrs {
			if a != nil {
				a.Release()
			}
		}
	}()
	ctx := compute.WithAllocator(w.ctx, w.l.mem)
	for i, c := range w.cols {
		to := w.schema.Field(i).Type
		switch {
		case c.src >= 0:
			a, err := castTo(ctx, w.l.mem, rec.Column(c.src), to)
			if err != nil {
				return nil, fmt.Errorf("column %q: %w", c.name, err)
			}
			arrs[i] = a
		case c.name == w.dayCol:
			b := array.NewDate32Builder(w.l.mem)
			b.Reserve(n)
			for range n {
				b.UnsafeAppend(arrow.Date32(w.day))
			}
			arrs[i] = b.NewArray()
			b.Release()
		default: // run id
			b := array.NewStringBuilder(w.l.mem)
			b.Reserve(n)
			b.ReserveData(n * len(w.run.ID))
			for range n {
				b.Append(w.run.ID)
			}
			arrs[i] = b.NewArray()
			b.Release()
		}
	}
	return array.NewRecordBatch(w.schema, arrs, int64(n)), nil
}

// castTo converts a to type to: extension arrays to their storage,
// dictionaries to their values, other types by arrow's cast (int32 ->
// int64, float32 -> float64, a timestamp's zone).
func castTo(ctx context.Context, mem memory.Allocator, a arrow.Array, to arrow.DataType) (arrow.Array, error) {
	if e, ok := a.(array.ExtensionArray); ok {
		a = e.Storage()
	}
	if arrow.TypeEqual(a.DataType(), to) {
		a.Retain()
		return a, nil
	}
	if d, ok := a.(*array.Dictionary); ok {
		dense, err := undictionary(mem, d)
		if err != nil {
			return nil, err
		}
		defer dense.Release()
		return castTo(ctx, mem, dense, to)
	}
	if ts, ok := a.DataType().(*arrow.TimestampType); ok {
		if tt, ok := to.(*arrow.TimestampType); ok && ts.Unit == tt.Unit {
			// the same instants; only the zone label differs
			data := array.NewData(to, a.Len(), a.Data().Buffers(), nil, a.NullN(), a.Data().Offset())
			defer data.Release()
			return array.MakeFromData(data), nil
		}
	}
	return compute.CastArray(ctx, a, compute.SafeCastOptions(to))
}

// undictionary expands a dictionary of strings into a string array.
func undictionary(mem memory.Allocator, d *array.Dictionary) (arrow.Array, error) {
	b := array.NewStringBuilder(mem)
	defer b.Release()
	b.Reserve(d.Len())
	switch dict := d.Dictionary().(type) {
	case *array.String:
		for i := range d.Len() {
			if d.IsNull(i) {
				b.AppendNull()
				continue
			}
			b.Append(dict.Value(d.GetValueIndex(i)))
		}
	case *array.LargeString:
		for i := range d.Len() {
			if d.IsNull(i) {
				b.AppendNull()
				continue
			}
			b.Append(dict.Value(d.GetValueIndex(i)))
		}
	default:
		return nil, fmt.Errorf("dictionary of %s", d.Dictionary().DataType())
	}
	return b.NewArray(), nil
}

// open starts a data file; huge names the columns of a batch holding a
// huge text value (lakefile.HugeColumns).
func (w *StageWriter) open(huge []string) error {
	name := fmt.Sprintf("%s/%s-%s-%05d.parquet", w.part, w.run.ID, w.tag, len(w.files))
	path := w.loc.NewDataLocation(name)
	f, err := w.fs.Create(path)
	if err != nil {
		return &TableError{Table: w.name, Step: "create data file", Path: path, Err: err}
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	hugeCols := map[string]bool{}
	for _, c := range huge {
		hugeCols[c] = true
	}
	fw, err := lakefile.NewFile(bw, w.schema, w.l.mem, hugeCols)
	if err != nil {
		f.Close()
		_ = w.fs.Remove(path)
		return &TableError{Table: w.name, Step: "start data file", Path: path, Err: err}
	}
	w.f, w.bw, w.fw, w.inCur = f, bw, fw, 0
	w.files = append(w.files, path)
	return nil
}

func (w *StageWriter) finish() error {
	if w.fw == nil {
		return nil
	}
	path := w.files[len(w.files)-1]
	err := w.fw.Close()
	if err == nil {
		err = w.bw.Flush()
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	w.fw, w.bw, w.f = nil, nil, nil
	if err != nil {
		return &TableError{Table: w.name, Step: "finish data file", Path: path, Err: err}
	}
	return nil
}

// Close finishes the last data file. The files are durable in the
// warehouse (an object store's upload completes at Close) but in no
// snapshot: Intent says how to commit them.
func (w *StageWriter) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	return w.finish()
}

// Intent is the staged change; call it after Close.
func (w *StageWriter) Intent() Intent {
	return Intent{Table: slices.Clone(w.ident), ParentSnapshotID: w.parent, Files: slices.Clone(w.files), Rows: w.rows,
		Mode: w.spec.Mode, Day: w.run.Day, RunID: w.run.ID, PrimaryKey: slices.Clone(w.spec.PrimaryKey), DayColumn: w.dayCol}
}

// Abort closes the writer and removes the files it wrote (a failed run's
// files never reach a snapshot).
func (w *StageWriter) Abort() error {
	if w.fw != nil {
		_ = w.fw.Close()
		w.fw = nil
	}
	if w.f != nil {
		_ = w.f.Close()
		w.f = nil
	}
	w.closed = true
	var errs []error
	for _, p := range w.files {
		if err := w.fs.Remove(p); err != nil && !isNotExist(err) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return &TableError{Table: w.name, Step: "abort: remove data files", Err: err}
	}
	return nil
}

// Stage writes every batch of rdr for spec's table and returns the
// Intent. rdr is read to its end, not released. On error the files
// written so far are removed.
func (l *Lakehouse) Stage(ctx context.Context, spec TableSpec, run Run, rdr array.RecordReader) (Intent, error) {
	w, err := l.NewStageWriter(ctx, spec, run)
	if err != nil {
		return Intent{}, err
	}
	for rdr.Next() {
		if err := ctx.Err(); err != nil {
			_ = w.Abort()
			return Intent{}, context.Cause(ctx)
		}
		if err := w.Write(rdr.RecordBatch()); err != nil {
			_ = w.Abort()
			return Intent{}, err
		}
	}
	if err := rdr.Err(); err != nil {
		_ = w.Abort()
		return Intent{}, &TableError{Table: w.name, Step: "stage: read batches", Err: err}
	}
	if err := w.Close(); err != nil {
		_ = w.Abort()
		return Intent{}, err
	}
	return w.Intent(), nil
}
