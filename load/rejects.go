package load

import (
	"context"
	"database/sql"
	"strings"
	"unicode/utf8"

	"github.com/sepipe/sepipe/transform"
)

// validText makes s storable as VARCHAR: invalid UTF-8 becomes U+FFFD.
func validText(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

func insertRejects(ctx context.Context, tx *sql.Tx, runID, object string, rejects []transform.Reject) error {
	const chunk = 256
	for len(rejects) > 0 {
		n := min(chunk, len(rejects))
		var b strings.Builder
		b.WriteString("INSERT INTO _sepipe_rejects (run_id, object, page, row_in_page, field, raw_value, reason, raw_row, raw_row_bytes, raw_value_file) VALUES ")
		args := make([]any, 0, n*10)
		for i, r := range rejects[:n] {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
			// Text DuckDB cannot hold (invalid UTF-8) is stored repaired, and
			// the raw row's exact bytes beside it.
			var rawBytes any
			if !utf8.ValidString(r.RawRow) || !utf8.ValidString(r.RawValue) {
				rawBytes = []byte(r.RawRow)
			}
			var rawFile any // a value too long for the warehouse, kept in the lake
			if r.RawFile != "" {
				rawFile = r.RawFile
			}
			args = append(args, runID, object, r.Page, r.Row, validText(r.Field), validText(r.RawValue), validText(r.Reason), validText(r.RawRow), rawBytes, rawFile)
		}
		if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
			return &WriteError{Object: object, Step: "record rejects", Path: "_sepipe_rejects", Err: err}
		}
		rejects = rejects[n:]
	}
	return nil
}
