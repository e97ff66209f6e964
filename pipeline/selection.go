package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sepipe/sepipe/extract"
)

// Ask is what a run is asked to read: streams by name (Objects, the
// command line's --objects; else Include), the streams left out
// (Exclude), those to rebuild (FullRefresh) and the configured ones
// (Streams), each of which must be a stream the tenant has.
type Ask struct {
	Objects     []string
	Include     []string
	Exclude     []string
	FullRefresh []string
	Streams     map[string]StreamConfig
}

// Selection is the streams of one run, resolved once by Select from the
// service's list of report objects and an Ask. Sync and Plan both take it
// (Config.Selection), so a sync and its dry run accept and refuse the
// same requests, and the list is fetched once a run.
type Selection struct {
	// Objects are the selected report objects, as the service lists them.
	Objects []extract.Object
	// Collections are the selected collections, in Collections' order.
	Collections []string
	// Asked are the report objects the run was asked for by name, also
	// when the tenant may not use Coach reporting (ReportingDenied): the
	// run then skips them, naming each.
	Asked []string
	// ReportingDenied is the listing's answer (403, 404) when the tenant
	// may not use Coach reporting: the run skips its report objects and
	// reads the rest.
	ReportingDenied error
	// Available is every stream the tenant has for this source: the
	// report objects it lists, then the collections the source holds the
	// credential for (webhook collections need the developer API token).
	Available []string
}

// Streams are the ids the run reads: its report objects, then its
// collections.
func (s *Selection) Streams() []string {
	ids := make([]string, 0, len(s.Objects)+len(s.Collections))
	for _, o := range s.Objects {
		ids = append(ids, o.ID)
	}
	return append(ids, s.Collections...)
}

// Reasons a request of a run is refused (SelectError.Err wraps one).
var (
	// ErrNotInRun: a stream to rebuild is not among those the run reads.
	ErrNotInRun = errors.New("not among the streams of this run")
	// ErrExcluded: a stream to rebuild is one the configuration excludes.
	ErrExcluded = errors.New("the config excludes it")
	// ErrExcludesAll: the exclusions leave nothing to read.
	ErrExcludesAll = errors.New("excludes every object the service has")
	// ErrNoCredential: a collection asked for by name whose interface
	// needs a credential the source does not hold.
	ErrNoCredential = errors.New("needs a credential this run does not have")
)

// SelectError is a request a run cannot take, naming where it is: Arg is
// "objects", "include", "exclude", "full-refresh" (Index its position in
// the list) or "streams" (Stream the configured stream). Err wraps
// ErrUnknownObject, ErrNotInRun, ErrExcluded, ErrExcludesAll or
// ErrNoCredential; Available lists the streams the tenant has.
type SelectError struct {
	Arg       string
	Index     int
	Stream    string
	Err       error
	Available []string
	// Within and Run, for ErrNotInRun: the streams of the run, and what
	// named them ("objects" or "include").
	Within string
	Run    []string
}

func (e *SelectError) Error() string {
	where := e.Arg
	if e.Arg == "streams" || e.Arg == "full-refresh" {
		where = fmt.Sprintf("%s %q", e.Arg, e.Stream)
	} else if e.Stream != "" {
		where = fmt.Sprintf("%s[%d] %q", e.Arg, e.Index, e.Stream)
	}
	return where + ": " + e.Reason()
}

// Reason is the refusal without where it is: "unknown report object
// "coarse" (the service has: ...)", "not among the streams of this run",
// ...
func (e *SelectError) Reason() string {
	switch {
	case errors.Is(e.Err, ErrUnknownObject):
		return fmt.Sprintf("%v %q (the service has: %s)", ErrUnknownObject, e.Stream, strings.Join(e.Available, ", "))
	case errors.Is(e.Err, ErrNoCredential):
		return fmt.Sprintf("stream %q: the %s interface %v (for webhooks: the developer API token)", e.Stream, streamInterface(e.Stream), ErrNoCredential)
	case errors.Is(e.Err, ErrNotInRun):
		return fmt.Sprintf("%v (%s: %s)", ErrNotInRun, e.Within, strings.Join(e.Run, ", "))
	}
	return e.Err.Error()
}

func (e *SelectError) Unwrap() error { return e.Err }

// Select resolves which streams a run reads: it lists the report objects
// (once; not when the run is asked for collections alone), checks that
// every stream the Ask names is one the tenant has, and returns the
// selection. The streams read are ask.Objects, else ask.Include, else
// every available stream but ask.Exclude; a stream to rebuild must be
// among them; each configured stream's settings must pass
// StreamConfig.Validate. A tenant whose listing is refused (403, 404) may
// not use Coach reporting: its report objects cannot be checked, and the
// selection says so (ReportingDenied). A request it refuses is a
// *SelectError (or, for a configured stream's settings, an *ObjectError at
// the step "config"); a listing that fails otherwise is returned as is.
func Select(ctx context.Context, src Source, ask Ask) (*Selection, error) {
	explicit := ask.Objects
	if len(explicit) == 0 {
		explicit = ask.Include
	}
	names := slices.Concat(explicit, ask.Exclude, ask.FullRefresh)
	for id := range ask.Streams {
		names = append(names, id)
	}
	list := len(explicit) == 0 && src.CanRead(extract.IfaceReporting) || slices.ContainsFunc(names, func(id string) bool { return !isCollection(id) })
	sel := &Selection{}
	var listed []extract.Object
	if list {
		all, err := src.Objects(ctx)
		switch {
		case notEntitled(err, true):
			sel.ReportingDenied = err
		case err != nil:
			return nil, fmt.Errorf("list report objects: %w", err)
		}
		listed = all
	}
	for _, o := range listed {
		sel.Available = append(sel.Available, o.ID)
	}
	sel.Available = append(sel.Available, Readable(src)...)
	denied := sel.ReportingDenied != nil
	// have: a stream the tenant has; a report object too when its
	// listing was refused (it cannot be checked, and the run skips it).
	have := func(id string) bool {
		return slices.Contains(sel.Available, id) || denied && !isCollection(id)
	}
	refuse := func(arg string, i int, id string, err error) *SelectError {
		if errors.Is(err, ErrUnknownObject) && isCollection(id) {
			err = ErrNoCredential // a collection the source holds no credential for
		}
		return &SelectError{Arg: arg, Index: i, Stream: id, Err: err, Available: sel.Available}
	}
	for _, l := range []struct {
		arg string
		ids []string
	}{{"include", ask.Include}, {"exclude", ask.Exclude}} {
		for i, id := range l.ids {
			if !have(id) {
				return nil, refuse(l.arg, i, id, ErrUnknownObject)
			}
		}
	}
	for _, id := range sortedStreams(ask.Streams) {
		if !have(id) && !isCollection(id) {
			return nil, refuse("streams", -1, id, ErrUnknownObject)
		}
	}
	for i, id := range ask.Objects {
		if !have(id) {
			return nil, refuse("objects", i, id, ErrUnknownObject)
		}
	}
	run := explicit
	if len(run) == 0 {
		for _, id := range sel.Available {
			if !slices.Contains(ask.Exclude, id) {
				run = append(run, id)
			}
		}
		if len(run) == 0 && len(ask.Exclude) > 0 {
			return nil, refuse("exclude", -1, "", ErrExcludesAll)
		}
	}
	for i, id := range ask.FullRefresh {
		switch {
		case slices.Contains(run, id):
		case !have(id):
			return nil, refuse("full-refresh", i, id, ErrUnknownObject)
		case len(ask.Objects) > 0:
			return nil, &SelectError{Arg: "full-refresh", Index: i, Stream: id, Err: ErrNotInRun, Available: sel.Available, Within: "objects", Run: ask.Objects}
		case len(ask.Include) > 0:
			return nil, &SelectError{Arg: "full-refresh", Index: i, Stream: id, Err: ErrNotInRun, Available: sel.Available, Within: "include", Run: ask.Include}
		default:
			return nil, &SelectError{Arg: "full-refresh", Index: i, Stream: id, Err: ErrExcluded, Available: sel.Available}
		}
	}
	for _, id := range sortedStreams(ask.Streams) {
		if err := ask.Streams[id].Validate(id); err != nil {
			return nil, &ObjectError{Object: id, Step: "config", Err: err}
		}
	}
	for _, id := range run {
		switch {
		case isCollection(id):
			if !slices.Contains(sel.Collections, id) {
				sel.Collections = append(sel.Collections, id)
			}
		case !slices.Contains(sel.Asked, id) && len(explicit) > 0:
			sel.Asked = append(sel.Asked, id)
		}
		if i := slices.IndexFunc(listed, func(o extract.Object) bool { return o.ID == id }); i >= 0 && !denied &&
			!slices.ContainsFunc(sel.Objects, func(o extract.Object) bool { return o.ID == id }) {
			sel.Objects = append(sel.Objects, listed[i])
		}
	}
	slices.SortStableFunc(sel.Collections, func(a, b string) int {
		return slices.Index(Collections, a) - slices.Index(Collections, b)
	})
	return sel, nil
}

// sortedStreams is the configured streams' ids, sorted (the order their
// faults are reported in).
func sortedStreams(m map[string]StreamConfig) []string {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}
