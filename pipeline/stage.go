package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/internal/faults"
	"github.com/sepipe/sepipe/lakehouse"
	"github.com/sepipe/sepipe/load"
	"github.com/sepipe/sepipe/schemas"
	"github.com/sepipe/sepipe/service"
	"github.com/sepipe/sepipe/transform"
)

func publishedFiles(lake load.Lake, s *stagedObject, date string) []string {
	out := make([]string, len(s.table.Files))
	dir := lake.PartitionDir(s.object, date)
	for i, f := range s.table.Files {
		out[i] = filepath.Join(dir, filepath.Base(f))
	}
	return out
}

type stagedObject struct {
	largestPage int   // bytes of the object's largest page
	hugeBytes   int64 // bytes of its pages of load.HugePage or more
	object      string
	table       load.Table
	intent      *lakehouse.Intent  // staged in the Iceberg lake; nil without one
	superseded  []lakehouse.Intent // recorded intents the intent's rebuild supersedes (holdBlocked)
	result      ObjectResult
	err         *ObjectError
}

// stager stages the streams of one run: what the staging of every
// stream shares.
type stager struct {
	src   Source
	lake  load.Lake
	lh    *lakehouse.Lakehouse // nil without an Iceberg lake
	early *earlyLoader
	res   *Result
	cfg   Config
	pr    *prior
	log   *slog.Logger
}

// streamStage is the staging of one stream: its settings, and what its
// read left for the table.
type streamStage struct {
	*stager
	id, name    string // the service's id, and the table's and lake folder's name
	sc          StreamConfig
	mode        load.WriteMode
	contract    schemas.Contract
	fullRefresh bool
	pk          []string // the key rows are checked (and merged) on
	so          *stagedObject
	started     time.Time

	schema   *arrow.Schema
	sink     *objectSink
	describe []service.Field
	diff     schemas.Diff
	since    string // incremental: the cursor value read from
	stats    extract.ReadStats
}

// stage reads one stream, a report object or a collection, and writes it
// into staging. Both kinds take the one path: an Arrow schema (from
// /describe, or inferred from a collection's items), the transform
// decoder with per-value rejects, the same Parquet sink and the same
// table. It never returns an error: a failure is kept in the result.
func (st *stager) stage(ctx context.Context, id string) *stagedObject {
	sc := st.cfg.Streams[id]
	s := &streamStage{stager: st, id: id, name: st.pr.name(id), sc: sc, pk: sc.PrimaryKey,
		fullRefresh: slices.Contains(st.cfg.FullRefresh, id), started: time.Now()}
	s.mode, _ = load.ParseWriteMode(string(sc.Mode))
	s.contract, _ = schemas.ParseContract(string(sc.Contract))
	s.so = &stagedObject{object: s.name}
	st.cfg.Progress.ObjectStarted(s.name)
	if err := load.CheckName(s.name); err != nil {
		return s.fail("name", err)
	}
	read := s.readReportObject
	if isCollection(id) {
		read = s.readCollection
	}
	if step, err := read(ctx); err != nil {
		return s.fail(step, err)
	}
	return s.finish()
}

// fail keeps the stream's failure at step in its result.
func (s *streamStage) fail(step string, err error) *stagedObject {
	s.so.err = &ObjectError{Object: s.id, Step: step, Err: err}
	status := classify(s.id, err)
	if status == StatusFailed {
		s.log.Error("stream failed", "stream", s.id, "step", step, "err", err)
	}
	s.cfg.Progress.ObjectDone(ObjectResult{Object: s.name, ServiceID: s.id, Status: status, Err: s.so.err})
	return s.so
}

// writers makes the stream's writers for schema: its Parquet writers in
// the staged partition (which tell the early load of each finished file)
// and, with an Iceberg lake, its table's stage writer.
func (s *streamStage) writers(ctx context.Context, schema *arrow.Schema) writerSet {
	run := s.res
	dir := s.lake.StagingDir(run.RunID, s.name, run.SnapshotDate)
	early := s.early.stream(s.name)
	ws := writerSet{parquet: func(first, step int) (load.Writer, error) {
		opts := []load.ParquetOption{load.InsideFolder(s.lake.Root), load.WithParquetAllocator(s.cfg.Allocator),
			load.WithFileNumbers(first, step), load.WithFileDone(func(path string) { early.file(schema, path) })}
		if partFileRows > 0 {
			opts = append(opts, load.WithRowsPerFile(partFileRows))
		}
		return load.NewParquetWriter(dir, s.name, schema, opts...)
	}, raw: &rawValues{lake: s.lake, run: run.RunID, object: s.name, date: run.SnapshotDate}, early: early}
	if s.lh != nil {
		ws.lake = func() (*lakehouse.StageWriter, error) {
			spec := lakehouse.TableSpec{Stream: s.name, Schema: schema, Mode: s.mode}
			for _, c := range columnsOf(schema, tableKey(s.sc, s.mode, s.pk)) {
				if c != "" {
					spec.PrimaryKey = append(spec.PrimaryKey, c)
				}
			}
			w, err := s.lh.NewStageWriter(ctx, spec, lakehouse.Run{ID: run.RunID, Day: run.SnapshotDate})
			if err != nil {
				return nil, fmt.Errorf("iceberg lake: %w", err)
			}
			return w, nil
		}
	}
	return ws
}

// decodeOptions are the decoder's options of every stream.
func (s *streamStage) decodeOptions() []transform.Option {
	return []transform.Option{transform.WithAllocator(s.cfg.Allocator), transform.WithMaxValueBytes(s.cfg.MaxValueBytes)}
}

// readCollection reads a collection: its schema is inferred from its
// items (collectionRead), widened as later pages call for. It returns the
// step that failed, and why.
func (s *streamStage) readCollection(ctx context.Context) (string, error) {
	if len(s.pk) == 0 {
		s.pk = []string{"id"} // items carry an id (docs/service-interface.md)
	}
	run, id, name := s.res, s.id, s.name
	cr := &collectionRead{name: id, contract: s.contract, stored: s.pr.fields[id], keys: s.pk, required: s.mode == load.Merge,
		spool: s.lake.SpoolPath(run.RunID, name), create: func() (*os.File, error) { return s.lake.CreateSpool(run.RunID, name) },
		writers: func(schema *arrow.Schema) writerSet { return s.writers(ctx, schema) }, opts: s.decodeOptions(), log: s.log}
	defer cr.close()
	var err error
	s.stats, err = cr.read(ctx, s.src, s.cfg.Progress)
	if err == nil {
		err = cr.finish(s.cfg.Progress)
	}
	if err != nil {
		if cr.sink != nil {
			cr.sink.abort()
		}
		return "read", err
	}
	s.schema, s.sink, s.describe = cr.schema, cr.sink, cr.live
	_, s.diff = schemas.ResolveInferred(s.contract, id, s.pr.fields[id], cr.fields)
	if !s.diff.Empty() && s.pr.fields[id] != nil {
		s.log.Info("the collection's items call for new or wider columns", "stream", id, "contract", s.contract, "diff", s.diff.String())
	}
	return "", nil
}

// readReportObject reads a report object: its schema is its describe
// resolved against the table's (Resolve, under the stream's contract),
// its read the stream's query (incremental from the watermark, filtered),
// each page decoded and handed to the sink. It returns the step that
// failed, and why.
func (s *streamStage) readReportObject(ctx context.Context) (string, error) {
	id, pr := s.id, s.pr
	live, err := s.src.Describe(ctx, id)
	if err != nil {
		return "describe", err
	}
	s.describe = live
	fields, d, err := schemas.Resolve(s.contract, id, pr.fields[id], live)
	s.diff = d
	if err != nil {
		return "schema", err
	}
	s.diff = pr.describeChanges(id, live, d)
	if !s.diff.Empty() {
		s.log.Warn("the object's describe changed", "object", id, "contract", s.contract, "diff", s.diff.String())
		added := slices.ContainsFunc(s.diff.Changes, func(c schemas.Change) bool { return c.Kind == schemas.FieldAdded })
		if added && s.sc.Cursor != "" && !s.fullRefresh && s.contract == schemas.Evolve {
			s.log.Warn("new columns of an incremental stream stay null for rows it does not reread; run with --full-refresh to backfill them", "object", id)
		}
	}
	if s.schema, err = schemas.FromDescribe(id, fields); err != nil {
		return "schema", err
	}
	query, since, aside, err := streamQuery(id, s.sc, fields, pr.state[id], s.fullRefresh, s.res.SnapshotDate)
	if err != nil {
		return "config", err
	}
	s.since = since
	if aside != "" {
		s.log.Warn("the saved watermark does not hold for this read: reading whole",
			"stream", id, "watermark", pr.state[id].Watermark, "cursor", s.sc.Cursor, "because", aside)
	}
	opts := s.decodeOptions()
	if len(s.pk) > 0 {
		// A key read twice in one read is drift, not data; the decoder
		// yields the keys in the pass that decodes the page.
		opts = append(opts, transform.WithKeyFields(s.mode == load.Merge, s.pk...))
	}
	dec, err := transform.NewDecoder(s.schema, opts...)
	if err != nil {
		return "schema", err
	}
	defer dec.Release()
	sink, err := newObjectSink(s.writers(ctx, s.schema))
	if err != nil {
		return "write", err
	}
	s.sink = sink
	s.stats, err = s.src.ReadObject(ctx, id, query, func(ctx context.Context, p *extract.Page) (service.PageInfo, error) {
		if p.Restart {
			// The pages did not add up and the client reads the object
			// again from page 1: drop everything written so far.
			return service.PageInfo{}, sink.restart()
		}
		r, err := dec.DecodePage(p.Number, p.Body)
		if err != nil {
			return service.PageInfo{}, err
		}
		sink.notePage(len(p.Body))
		defer r.Record.Release()
		if err := sink.add(r, p.Body); err != nil {
			return service.PageInfo{}, err
		}
		s.cfg.Progress.PageDone(s.name, p.Number, r.Info.Rows, r.Info.TotalPages)
		return r.Info, nil
	})
	if err != nil {
		sink.abort()
		return "read", err
	}
	return "", nil
}

// finish closes the stream's writers and makes its table (load.Table),
// its Iceberg intent and its result.
func (s *streamStage) finish() *stagedObject {
	so, sink, id, name, log := s.so, s.sink, s.id, s.name, s.log
	so.largestPage, so.hugeBytes = sink.largestPage, sink.hugeBytes
	files, rows, err := sink.close()
	if err != nil {
		sink.abort()
		return s.fail("write", err)
	}
	if len(sink.unknown) > 0 {
		what := "the service sent fields that describe does not list; they were not stored"
		if isCollection(id) {
			what = "the items hold fields the contract keeps out of the table (under freeze their values are in _sepipe_rejects)"
		}
		log.Warn(what, "stream", id, "contract", s.contract, "fields", sink.unknown)
	}
	dur := time.Since(s.started)
	stats := s.stats
	so.table = load.Table{
		Object:      name,
		ServiceID:   id,
		Schema:      s.schema,
		Files:       files,
		Rows:        rows,
		Rejects:     sink.rejects,
		Mode:        s.mode,
		PrimaryKey:  columnsOf(s.schema, tableKey(s.sc, s.mode, s.pk)),
		Cursor:      columnsOf(s.schema, []string{s.sc.Cursor})[0],
		ReadFilters: readFilters(s.sc),
		FullRefresh: s.fullRefresh,
		Describe:    s.describe,
		Stats: load.ObjectStats{
			Rows: rows, RejectedRows: sink.rejectedRows, NulledValues: sink.nulled,
			Pages: stats.Pages, Requests: stats.Requests, Retries: stats.Retries, Duration: dur,
		},
	}
	if sink.intent != nil && (rebuildsLake(s.mode, s.fullRefresh) || (s.pr.afresh[name] && s.mode == load.Merge)) {
		// The warehouse's table is rebuilt from this run's rows (a full
		// refresh of an append or merge stream, or a stream become a merge
		// stream whose table starts afresh: load.Warehouse.StartsAfresh);
		// so is the Iceberg table, which for a merge stream is that table.
		// A replace or append stream's Iceberg table is its history, every
		// day: its full refresh, or a mode change, replaces only its day.
		sink.intent.Rebuild = true
	}
	if b := s.pr.supersede[name]; b != nil && sink.intent != nil && sink.intent.Rebuild {
		// Earlier commits that could not be made (a data file of the
		// table gone) give way to the rebuild, in the run's transaction.
		so.table.LakeSupersedes, so.superseded = b.runs, b.intents
	}
	if sink.intent != nil {
		js, err := json.Marshal(sink.intent)
		if err != nil {
			sink.abort()
			return s.fail("write", err)
		}
		so.intent, so.table.LakeIntent = sink.intent, js
		faults.At(faults.LakeStaged, name)
	}
	so.result = ObjectResult{
		Object: name, ServiceID: id, Mode: s.mode, Status: StatusOK, Diff: s.diff, Since: s.since, Rows: rows, RejectedRows: sink.rejectedRows,
		Pages: stats.Pages, Requests: stats.Requests, Retries: stats.Retries,
		Duration: dur, SchemaVersion: schemas.SchemaVersion(s.schema), UnknownFields: sink.unknown,
		RepairedValues: sink.repaired, LongValues: sink.long, NulledValues: sink.nulled,
	}
	if sink.repaired > 0 {
		log.Warn("text values that were not valid UTF-8 were stored with U+FFFD in place of the invalid bytes",
			"stream", id, "values", sink.repaired)
	}
	if sink.long > 0 {
		log.Warn("values longer than max_value_bytes are null in the table; each is kept whole in a file of the lake partition (_sepipe_rejects.raw_value_file)",
			"stream", id, "values", sink.long, "max_value_bytes", s.cfg.MaxValueBytes)
	}
	if sink.nulled > 0 || sink.rejectedRows > 0 {
		log.Warn("values that do not fit their column's type are null in their rows, and rows that cannot be placed are left out; each is in _sepipe_rejects",
			"stream", id, "values", sink.nulled, "rows_left_out", sink.rejectedRows)
	}
	log.Info("stream staged", "stream", id, "rows", rows, "pages", stats.Pages,
		"requests", stats.Requests, "retries", stats.Retries, "duration", dur.Round(time.Millisecond))
	s.cfg.Progress.ObjectDone(so.result)
	return so
}

// tableKey is the key a stream's table has: the configured one, and for
// a merge stream the key it merges on (a collection merges on id unless
// told otherwise).
func tableKey(sc StreamConfig, mode load.WriteMode, pk []string) []string {
	if mode == load.Merge {
		return pk
	}
	return sc.PrimaryKey
}

// columnsOf maps field ids (as the config names them) to their columns.
func columnsOf(s *arrow.Schema, ids []string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		if id != "" {
			out[i] = schemas.ColumnName(s, id)
		}
	}
	return out
}
