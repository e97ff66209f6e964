package pipeline

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/load"
	"github.com/sepipe/sepipe/schemas"
	"github.com/sepipe/sepipe/service"
)

// Counter is what a plan needs beyond Source: one results page, to read
// totalResults without reading the rows. *extract.Client implements it.
type Counter interface {
	Source
	QueryPage(ctx context.Context, objectID string, q extract.Query) (*extract.Page, error)
}

var _ Counter = (*extract.Client)(nil)

// PlanConfig is a Config and the page size the client would read with.
type PlanConfig struct {
	Config
	PageSize int // rows per page; default extract.DefaultPageSize
}

// ObjectPlan is what a sync would do for one object.
type ObjectPlan struct {
	Object      string
	Mode        load.WriteMode
	Contract    schemas.Contract
	FullRefresh bool
	Incremental bool   // the stream has a cursor
	Collection  bool   // a collection stream: read whole, its size not known before
	Since       string // cursor value it would read from, "" for a full read
	Fields      int    // effective fields (columns) after this run
	NewTable    bool   // the warehouse has no table for it yet
	Diff        schemas.Diff
	Rows        int64  // rows the read would return (totalResults); -1 if unknown
	Pages       int    // result pages it would read
	Requests    int    // describe + pages
	Partition   string // lake partition the run would write
	Replaces    bool   // that partition exists and would be replaced
	Err         error  // the object would fail: describe refused, drift under freeze, bad filter
	// Skipped: the tenant is not entitled to the stream's interface (Err
	// says why); a sync would skip it.
	Skipped bool
	// NotContinued: a quota deferred streams earlier on the snapshot day,
	// and a sync would continue only those and the streams that failed
	// that day (Config.Continuation): it would not read this one (it
	// committed that day, or was not among that day's runs).
	NotContinued bool
}

// PlanResult is a dry run's answer.
type PlanResult struct {
	SnapshotDate string
	Warehouse    string
	HasWarehouse bool // the warehouse file exists (it was opened read-only)
	Objects      []ObjectPlan
	Requests     int // estimated requests of the whole sync: objects + every object's
	// Continues: a quota deferred streams earlier on the snapshot day, and
	// the sync would read only the unfinished ones (the others NotContinued).
	Continues bool
}

// Plan says what Sync would do with cfg, and writes nothing: no lock, no
// staging, no folder. The warehouse is opened read-only, and not at all if
// it does not exist. Per object it describes, compares the describe with
// the warehouse's stored schema under the stream's contract, and asks the
// service for page 1 with resultsPerPage 1 (with the cursor filter for an
// incremental stream) to learn how many rows, and so pages, the read would
// take. On a snapshot day a quota left streams unfinished, the streams a
// sync would not read are only listed (NotContinued). Errors that would
// stop the whole sync (objects not listed, unknown object, warehouse
// locked) are returned; an object's own failure is in its ObjectPlan.Err.
func Plan(ctx context.Context, src Counter, cfg PlanConfig) (*PlanResult, error) {
	cfg.setDefaults()
	if cfg.PageSize <= 0 {
		cfg.PageSize = extract.DefaultPageSize
	}
	lake := load.Lake{Root: cfg.Out}
	day := cfg.Now().UTC().Format("2006-01-02")
	res := &PlanResult{SnapshotDate: day, Warehouse: lake.WarehousePath(), Requests: 1}

	// Collections have no describe and no count to ask for: they are
	// planned as full reads of unknown size.
	sel, err := cfg.selection(ctx, src)
	if err != nil {
		return nil, err
	}
	collections, reportObjects := sel.Collections, sel.Asked
	var denied []ObjectPlan // report objects a sync would skip
	if err := sel.ReportingDenied; err != nil {
		names := reportObjects
		if len(names) == 0 {
			names = []string{"(" + extract.IfaceReporting + ")"}
		}
		for _, n := range names {
			denied = append(denied, ObjectPlan{Object: n, Skipped: true, Err: err, Rows: -1})
		}
	}
	ids := make([]string, len(sel.Objects))
	for i, o := range sel.Objects {
		ids[i] = o.ID
	}

	// The streams are named as the sync names them (recoverAndRead): the
	// recorded names, and new ones given to the same ids, so that the plan
	// speaks of the tables and lake folders the sync would write.
	pr := &prior{fields: map[string][]service.Field{}, describes: map[string][]service.Field{}, state: map[string]load.State{}, names: load.NewNames(nil)}
	tables := map[string]bool{}
	unfinished := map[string]bool{} // by stream id
	withCollections := append(slices.Clone(ids), collections...)
	named := append(slices.Clone(withCollections), reportObjects...)
	wh, err := load.OpenReadOnly(ctx, lake.WarehousePath())
	switch {
	case errors.Is(err, load.ErrNoWarehouse):
		pr.names.Assign(named, Collections) // every name is new
	case err != nil:
		return nil, err
	default:
		res.HasWarehouse = true
		err := func() error {
			defer wh.Close()
			names, err := wh.Names(ctx)
			if err != nil {
				return err
			}
			names.Assign(named, Collections)
			pr.names = names
			left, err := wh.Unfinished(ctx, day)
			if err != nil {
				return err
			}
			for _, id := range withCollections {
				name := pr.name(id)
				unfinished[id] = slices.Contains(left, name)
				if isCollection(id) {
					has, err := wh.HasTable(ctx, name)
					if err != nil {
						return fmt.Errorf("warehouse %s: %w", wh.Path(), err)
					}
					tables[id] = has
					if !slices.Contains(cfg.FullRefresh, id) {
						if pr.fields[id], err = wh.StoredFields(ctx, name); err != nil {
							return err
						}
					}
					continue
				}
				if slices.Contains(cfg.FullRefresh, id) {
					continue
				}
				f, err := wh.StoredFields(ctx, name)
				if err != nil {
					return err
				}
				pr.fields[id] = f
				if pr.describes[id], err = wh.StoredDescribe(ctx, name); err != nil {
					return err
				}
				if st, ok, err := wh.State(ctx, name); err != nil {
					return err
				} else if ok {
					pr.state[id] = st
				}
				has, err := wh.HasTable(ctx, name)
				if err != nil {
					return fmt.Errorf("warehouse %s: %w", wh.Path(), err)
				}
				tables[id] = has
			}
			return nil
		}()
		if err != nil {
			return nil, err
		}
	}

	read, cont := cfg.Continuation.streams(withCollections, cfg.FullRefresh, func(id string) bool { return unfinished[id] })
	res.Continues = cont
	for _, id := range withCollections {
		if !slices.Contains(read, id) {
			res.Objects = append(res.Objects, ObjectPlan{Object: id, NotContinued: true, Rows: -1, Collection: isCollection(id)})
		}
	}
	for _, id := range ids {
		if !slices.Contains(read, id) {
			continue
		}
		op := planObject(ctx, src, cfg, id, day, pr, tables[id])
		planPartition(&op, lake, pr.name(id), day)
		res.Requests += op.Requests
		res.Objects = append(res.Objects, op)
	}
	for _, name := range collections {
		if !slices.Contains(read, name) {
			continue
		}
		op := ObjectPlan{Object: name, Collection: true, Rows: -1, Requests: 1, NewTable: !tables[name],
			Fields: max(len(pr.fields[name]), len(seedFields[name])), FullRefresh: slices.Contains(cfg.FullRefresh, name)}
		op.Mode, _ = load.ParseWriteMode(string(cfg.Streams[name].Mode))
		op.Contract = schemas.Evolve
		planPartition(&op, lake, pr.name(name), day)
		res.Requests += op.Requests
		res.Objects = append(res.Objects, op)
	}
	slices.SortFunc(res.Objects, func(a, b ObjectPlan) int { return strings.Compare(a.Object, b.Object) })
	res.Objects = append(res.Objects, denied...)
	return res, nil
}

// planPartition sets the lake partition the sync would write for the
// stream named name, and whether it exists (the sync would replace it). A
// name the sync would refuse (load.CheckName) fails the object, as it
// would fail the sync's, and builds no path.
func planPartition(op *ObjectPlan, lake load.Lake, name, day string) {
	if err := load.CheckName(name); err != nil {
		if op.Err == nil {
			op.Err = &ObjectError{Object: op.Object, Step: "name", Err: err}
		}
		return
	}
	op.Partition = lake.PartitionDir(name, day)
	if _, err := os.Stat(op.Partition); err == nil {
		op.Replaces = true
	}
}

func planObject(ctx context.Context, src Counter, cfg PlanConfig, id, day string, pr *prior, hasTable bool) ObjectPlan {
	sc := cfg.Streams[id]
	op := ObjectPlan{Object: id, Rows: -1, Incremental: sc.Cursor != "", NewTable: !hasTable,
		FullRefresh: slices.Contains(cfg.FullRefresh, id)}
	op.Mode, _ = load.ParseWriteMode(string(sc.Mode))
	op.Contract, _ = schemas.ParseContract(string(sc.Contract))
	op.Requests = 1
	live, err := src.Describe(ctx, id)
	if err != nil {
		op.Err = &ObjectError{Object: id, Step: "describe", Err: err}
		return op
	}
	fields, diff, err := schemas.Resolve(op.Contract, id, pr.fields[id], live)
	op.Diff = diff
	if err != nil {
		op.Err = &ObjectError{Object: id, Step: "schema", Err: err}
		return op
	}
	op.Diff = pr.describeChanges(id, live, diff)
	op.Fields = len(fields)
	if _, err := schemas.FromDescribe(id, fields); err != nil {
		op.Err = &ObjectError{Object: id, Step: "schema", Err: err} // as the sync would fail it
		return op
	}
	q, since, _, err := streamQuery(id, sc, fields, pr.state[id], op.FullRefresh, day)
	if err != nil {
		op.Err = &ObjectError{Object: id, Step: "config", Err: err}
		return op
	}
	op.Since = since
	q.Page, q.ResultsPerPage = 1, 1
	p, err := src.QueryPage(ctx, id, q)
	if err != nil {
		op.Err = &ObjectError{Object: id, Step: "count", Err: err}
		return op
	}
	info, err := extract.ParsePageInfo(p.Body)
	if err != nil {
		op.Err = &ObjectError{Object: id, Step: "count", Err: err}
		return op
	}
	op.Rows = info.TotalResults
	pages := 1
	if info.TotalResults > 0 {
		pages = int((info.TotalResults + int64(cfg.PageSize) - 1) / int64(cfg.PageSize))
	}
	op.Pages = pages
	op.Requests += pages
	if extract.ReadsPastTheEnd(info.TotalResults, cfg.PageSize) {
		op.Requests++ // the page after a full last page
	}
	return op
}
