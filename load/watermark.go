package load

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
)

// FutureCursorSlack is how far past a run's start a date cursor may be
// and still move the stream's watermark: clock skew between the service
// and this machine. A later date is a bad value (a year 2099), which as
// the watermark would hide every row changed before it from every later
// read.
const FutureCursorSlack = 24 * time.Hour

// FutureWatermark reports whether wm, a date watermark (RFC 3339), is
// later than a run started at start could have seen (FutureCursorSlack
// past it): a bad value an earlier release saved, under which every read
// would skip every row changed before that date. The read is then whole.
func FutureWatermark(wm string, start time.Time) bool {
	t, err := time.Parse(time.RFC3339Nano, wm)
	if err != nil || start.IsZero() {
		return false // a number, or no start to judge by
	}
	return t.After(start.Add(FutureCursorSlack))
}

// moveWatermark sets the stream's watermark to the largest cursor value of
// the run's rows, if that is later than the saved one.
func moveWatermark(ctx context.Context, tx *sql.Tx, run Run, t Table, src string) error {
	idx := t.Schema.FieldIndices(t.Cursor)
	if idx == nil {
		return &WriteError{Object: t.Object, Step: "watermark", Err: fmt.Errorf("cursor field %q is not a column", t.Cursor)}
	}
	c := Ident(t.Cursor)
	expr, args := "CAST(max("+c+") AS VARCHAR), 0", []any(nil)
	if _, ok := t.Schema.Field(idx[0]).Type.(*arrow.TimestampType); ok {
		// A date later than the run could be (a day of clock skew
		// allowed) is a bad value, not progress: taken for the watermark
		// it would hide every row changed before that date from every
		// later read, silently. Such rows are read again each run.
		bound := run.Started
		if bound.IsZero() {
			bound = time.Now()
		}
		// In UTC whatever the session's time zone: a plain ::TIMESTAMP
		// cast takes the machine's, and under TZ=Asia/Tokyo labelled a
		// time 9 hours late with Z, so the next read skipped what changed
		// between (found by review).
		expr = "strftime((max(" + c + ") FILTER (WHERE " + c + " <= ?)) AT TIME ZONE 'UTC', '%Y-%m-%dT%H:%M:%S.%fZ'), count(*) FILTER (WHERE " + c + " > ?)"
		limit := bound.Add(FutureCursorSlack).UTC()
		args = []any{limit, limit}
	}
	var wm sql.NullString
	var future int64
	if err := tx.QueryRowContext(ctx, "SELECT "+expr+" FROM "+src, args...).Scan(&wm, &future); err != nil {
		return &WriteError{Object: t.Object, Step: "watermark", Err: err}
	}
	if t.FutureCursors != nil {
		*t.FutureCursors = future
	}
	old, ok, err := stateOf(ctx, tx, t.Object)
	if err != nil {
		return err
	}
	if ok && !t.FullRefresh && old.CursorField == t.Cursor && FutureWatermark(old.Watermark, run.Started) {
		// An earlier release saved a bad date (a year 2099) as the
		// watermark: it goes, for the run's plausible latest, or none.
		ok = false
		if !wm.Valid {
			_, err := tx.ExecContext(ctx, `DELETE FROM _sepipe_state WHERE stream = ?`, t.Object)
			if err != nil {
				return &WriteError{Object: t.Object, Step: "drop watermark", Path: "_sepipe_state", Err: err}
			}
			return nil
		}
	}
	if !wm.Valid {
		return nil // no cursor values: keep the old watermark
	}
	// prior is the watermark before this snapshot day's first run: a
	// same-day rerun reads from it again, so the day's partition is whole.
	var prior any
	switch {
	case !ok || t.FullRefresh || old.CursorField != t.Cursor || !old.SameRead(t.ReadFilters):
	case old.SnapshotDate == run.SnapshotDate:
		if old.PriorWatermark != "" {
			prior = old.PriorWatermark
		}
	default:
		prior = old.Watermark
	}
	next := wm.String
	if ok && !t.FullRefresh && old.CursorField == t.Cursor && old.SameRead(t.ReadFilters) && watermarkLess(next, old.Watermark) {
		next = old.Watermark
	}
	_, err = tx.ExecContext(ctx, `INSERT OR REPLACE INTO _sepipe_state
		(stream, cursor_field, watermark, run_id, updated_at, snapshot_date, prior_watermark, read_filters)
		VALUES (?, ?, ?, ?, ?, CAST(? AS DATE), ?, ?)`,
		t.Object, t.Cursor, next, run.ID, run.Finished.UTC(), run.SnapshotDate, prior, t.ReadFilters)
	if err != nil {
		return &WriteError{Object: t.Object, Step: "save watermark", Path: "_sepipe_state", Err: err}
	}
	return nil
}

// watermarkLess compares two watermarks of the same cursor: numbers as
// numbers, timestamps (fixed-width ISO strings) as strings.
func watermarkLess(a, b string) bool {
	ia, errA := strconv.ParseInt(a, 10, 64)
	ib, errB := strconv.ParseInt(b, 10, 64)
	if errA == nil && errB == nil {
		return ia < ib // exact past 2^53, where floats are not
	}
	fa, errA := strconv.ParseFloat(a, 64)
	fb, errB := strconv.ParseFloat(b, 64)
	if errA == nil && errB == nil {
		return fa < fb // -50 before -10, 9 before 10
	}
	return a < b
}
