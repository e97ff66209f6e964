package pipeline

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/load"
	"github.com/sepipe/sepipe/schemas"
	"github.com/sepipe/sepipe/service"
)

// CheckStream checks the stream configuration sc of report object object
// against the object's fields (its describe): the primary key and the
// cursor name fields, the cursor is a date or a number, a lookback has a
// date cursor, and each filter suits its field (extract.Query.Validate).
// It returns a *StreamConfigError naming the StreamConfig field at fault
// (for a filter, its index). Sync and Plan call it before a stream's read;
// the CLI calls it to name the config's line before the run starts.
func CheckStream(object string, sc StreamConfig, fields []service.Field) error {
	bad := func(field string, format string, a ...any) error {
		return &StreamConfigError{Field: field, Err: fmt.Errorf(format, a...)}
	}
	byID := map[string]service.Field{}
	for _, f := range fields {
		byID[f.ID] = f
	}
	for _, k := range sc.PrimaryKey {
		if _, ok := byID[k]; !ok {
			return bad("PrimaryKey", "primary key field %q is not a field of %s", k, object)
		}
	}
	if sc.Cursor != "" {
		cf, ok := byID[sc.Cursor]
		if !ok {
			return bad("Cursor", "cursor field %q is not a field of %s", sc.Cursor, object)
		}
		if t, _ := schemas.TypeNamed(cf.Type); t.Number == 0 && t.Value != schemas.ValueTime {
			return bad("Cursor", "cursor field %q of %s has type %s; a cursor must be a date or a number", sc.Cursor, object, cf.Type)
		}
		if t, _ := schemas.TypeNamed(cf.Type); sc.Lookback != 0 && t.Value != schemas.ValueTime {
			return bad("Lookback", "lookback %s needs a date cursor; cursor field %q of %s has type %s (remove the lookback, or widen the read with a filter)",
				sc.Lookback, sc.Cursor, object, cf.Type)
		}
	}
	for i, f := range sc.Filters {
		if err := (extract.Query{Filters: []extract.Filter{f}}).Validate(fields); err != nil {
			return &StreamConfigError{Field: "Filters", Filter: i, Err: err}
		}
	}
	return nil
}

// streamQuery builds the read of one stream: its configured filters and,
// for an incremental stream with a saved watermark, cursor >= watermark -
// lookback. since is the cursor value read from ("" for a full read);
// aside says why a saved watermark was set aside (buildQuery).
func streamQuery(object string, sc StreamConfig, fields []service.Field, st load.State, fullRefresh bool, day string) (q extract.Query, since, aside string, err error) {
	if err := CheckStream(object, sc, fields); err != nil {
		return q, "", "", err
	}
	q, since, aside, err = buildQuery(object, sc, fields, st, fullRefresh, day)
	if err != nil {
		return q, "", "", err
	}
	if err := q.Validate(fields); err != nil {
		return q, "", "", fmt.Errorf("filters of %s: %w", object, err)
	}
	return q, since, aside, nil
}

// buildQuery is streamQuery after CheckStream (sc fits fields) and
// before the whole query's check. aside says why a saved watermark was set
// aside for a whole read ("" when none was, or the read is from it): the
// cursor or the filters changed, or it is a date later than the run could
// be.
func buildQuery(object string, sc StreamConfig, fields []service.Field, st load.State, fullRefresh bool, day string) (q extract.Query, since, aside string, err error) {
	q.Filters = slices.Clone(sc.Filters)
	if sc.Cursor == "" {
		return q, "", "", nil
	}
	var cf service.Field
	for _, f := range fields {
		if f.ID == sc.Cursor {
			cf = f
		}
	}
	// The watermark holds for reads like the ones it was saved from: with
	// other filters, the rows below it they let through were never read.
	switch {
	case fullRefresh || st.Watermark == "":
		return q, "", "", nil
	case st.CursorField != sc.Cursor:
		return q, "", "the cursor field changed from " + strconv.Quote(st.CursorField), nil
	case !st.SameRead(readFilters(sc)):
		return q, "", "the filters changed", nil
	}
	ct, _ := schemas.TypeNamed(cf.Type)
	if end, err := time.Parse("2006-01-02", day); err == nil && ct.Value == schemas.ValueTime &&
		(load.FutureWatermark(st.Watermark, end.AddDate(0, 0, 1)) || load.FutureWatermark(st.PriorWatermark, end.AddDate(0, 0, 1))) {
		// A date later than the run could be, saved by an earlier
		// release: every read from it would skip every row changed
		// before it. Read whole; the commit replaces it.
		return q, "", "it is a date later than the run could be", nil
	}
	wm := st.Watermark
	if st.SnapshotDate == day {
		// A rerun on the same day reads what that day's first run read.
		if wm = st.PriorWatermark; wm == "" {
			return q, "", "", nil
		}
	}
	var from any
	switch ct.Value {
	case schemas.ValueTime:
		t, err := time.Parse(time.RFC3339Nano, wm)
		if err != nil {
			return q, "", "", fmt.Errorf("saved watermark %q of %s is not a date: %w", wm, object, err)
		}
		t = t.Add(-sc.Lookback).UTC().Truncate(time.Second)
		since = t.Format(time.RFC3339)
		from = since
	case schemas.ValueInt:
		v, err := strconv.ParseInt(wm, 10, 64)
		if err != nil {
			return q, "", "", fmt.Errorf("saved watermark %q of %s is not an integer: %w", wm, object, err)
		}
		from = v
		since = wm
	default:
		v, err := strconv.ParseFloat(wm, 64)
		if err != nil {
			return q, "", "", fmt.Errorf("saved watermark %q of %s is not a number: %w", wm, object, err)
		}
		from = v
		since = wm
	}
	q.Filters = append(q.Filters, extract.Ge(sc.Cursor, from))
	return q, since, "", nil
}

// readFilters is the text of what a stream's reads are filtered by besides
// the cursor, saved with its watermark (load.Table.ReadFilters) and
// compared with the next run's (load.State.SameRead).
func readFilters(sc StreamConfig) string {
	if len(sc.Filters) == 0 {
		return "[]"
	}
	b, err := json.Marshal(sc.Filters)
	if err != nil { // values from YAML always marshal; be safe: never the same read
		return fmt.Sprintf("unencodable %v", sc.Filters)
	}
	return string(b)
}
