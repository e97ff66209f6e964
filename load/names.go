package load

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Names: the one place that turns a stream's service id into the name
// sepipe gives its table and its lake folder. A service id is untrusted
// text: it may hold path separators, "..", glob characters, '?', '=',
// control characters, or differ from another id only by case (DuckDB
// names are case-insensitive), or be one of sepipe's own names. A name is:
//
//   - made of ASCII letters, digits, '_' and '-' only (anything else
//     becomes '_', and the id's hash is appended so that two ids that
//     clean up alike stay apart), at most 100 bytes;
//   - never one of sepipe's own names: the events table, the _sepipe_*
//     tables, a name ending in _history or _versions (a stream's history
//     view and its versions), and, for a
//     report object, a collection's table;
//   - unique ignoring case among the stream names the warehouse knows: a
//     collision gets a suffix _2, _3, ...;
//   - stable: Commit records each id's name in _sepipe_names, and a name
//     once given is kept for that id on every later run, whatever new ids
//     appear.
//
// An ordinary id (course, userCourseProgress) is its own name, so the
// names of existing warehouses do not change.

// maxNameLen bounds a name (before a collision suffix).
const maxNameLen = 100

// ErrBadName is wrapped when a name is not one Names would give.
var ErrBadName = errors.New("not a safe stream name")

// Names maps service ids to stream names. Build it with Warehouse.Names
// (the recorded names) and call Assign for the ids of a run.
type Names struct {
	byID  map[string]string
	taken map[string]string // lower-case name -> id
	fresh map[string]bool   // ids named in this run, not yet recorded
	// reserved are names no stream may take (lower case): sepipe's own
	// tables besides those of the collections.
	reserved map[string]bool
}

// NewNames starts a mapping from recorded id -> name pairs.
func NewNames(recorded map[string]string) *Names {
	n := &Names{byID: map[string]string{}, taken: map[string]string{}, fresh: map[string]bool{},
		reserved: map[string]bool{strings.ToLower(EventsTable): true}}
	for id, name := range recorded {
		n.byID[id] = name
		n.taken[strings.ToLower(name)] = id
	}
	return n
}

// Assign gives every id its name: the recorded one, else a new one.
// Collections (reserved for those ids only) keep their own names. New ids
// are named in a fixed order (by lower-case id, the lower-case spelling
// first), so one run's new names do not depend on the order the service
// listed them in.
func (n *Names) Assign(ids []string, collections []string) {
	// Ids equal but for case: the lower-case one first, so that it keeps
	// its own name (user before User).
	sorted := slices.Clone(ids)
	slices.SortFunc(sorted, func(a, b string) int {
		if c := strings.Compare(strings.ToLower(a), strings.ToLower(b)); c != 0 {
			return c
		}
		return strings.Compare(b, a)
	})
	for _, id := range sorted {
		if _, ok := n.byID[id]; ok {
			continue
		}
		if slices.Contains(collections, id) {
			n.set(id, id)
			continue
		}
		base := safeName(id)
		if n.forbidden(base, collections) {
			// "stream_" first and the hash last: no longer sepipe's.
			base = "stream_" + strings.TrimSuffix(base, "_"+idHash(id)) + "_" + idHash(id)
		}
		name := base
		for k := 2; n.taken[strings.ToLower(name)] != ""; k++ {
			name = fmt.Sprintf("%s_%d", base, k)
		}
		n.set(id, name)
	}
}

func (n *Names) set(id, name string) {
	n.byID[id] = name
	n.taken[strings.ToLower(name)] = id
	n.fresh[id] = true
}

// forbidden reports a name that is sepipe's own.
func (n *Names) forbidden(name string, collections []string) bool {
	l := strings.ToLower(name)
	if n.reserved[l] || strings.HasPrefix(l, "_sepipe") || strings.HasSuffix(l, "_history") || strings.HasSuffix(l, "_versions") {
		return true
	}
	for _, c := range collections {
		if l == strings.ToLower(c) {
			return true
		}
	}
	return false
}

// Name returns an id's name; ok is false for an id Assign has not named.
func (n *Names) Name(id string) (string, bool) {
	name, ok := n.byID[id]
	return name, ok
}

// safeName cleans an id up to the name's characters; a changed or
// shortened id gets its hash appended.
func safeName(id string) string {
	var b strings.Builder
	changed := false
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-':
			b.WriteByte(c)
		default:
			b.WriteByte('_')
			changed = true
		}
	}
	s := b.String()
	if len(s) > maxNameLen {
		s, changed = s[:maxNameLen], true
	}
	if s == "" || strings.Trim(s, "_-") == "" {
		s, changed = "stream", true
	}
	if changed {
		s += "_" + idHash(id)
	}
	return s
}

// idHash is 8 hex digits of the id's SHA-256: stable, and enough to keep
// apart ids that clean up alike.
func idHash(id string) string {
	h := sha256.Sum256([]byte(id))
	return hex.EncodeToString(h[:4])
}

// CheckName reports whether name is one Names could have given: the
// guard of every path and identifier sepipe builds from a stream name.
func CheckName(name string) error {
	if name == "" || len(name) > maxNameLen+20 || name != safeNameChars(name) || strings.Trim(name, "_-") == "" {
		return fmt.Errorf("%w: %q", ErrBadName, name)
	}
	return nil
}

func safeNameChars(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			return r
		}
		return -1
	}, s)
}

// namesDDL records each stream's name.
const namesDDL = `
CREATE TABLE IF NOT EXISTS _sepipe_names (
	id_hex       VARCHAR PRIMARY KEY, -- the service id's bytes, hex: exact whatever they are
	id           VARCHAR NOT NULL,    -- the service id as text (invalid UTF-8 shown as U+FFFD)
	name         VARCHAR NOT NULL,    -- the table's and the lake folder's name
	first_run_id VARCHAR NOT NULL
);`

// Names reads the recorded names.
func (w *Warehouse) Names(ctx context.Context) (*Names, error) {
	var have int
	if err := w.db.QueryRowContext(ctx, `SELECT count(*) FROM duckdb_tables() WHERE table_name = '_sepipe_names'`).Scan(&have); err != nil {
		return nil, fmt.Errorf("read stream names: %w", err)
	}
	if have == 0 {
		return NewNames(nil), nil // a read-only warehouse of an older version
	}
	rows, err := w.db.QueryContext(ctx, `SELECT id_hex, name FROM _sepipe_names`)
	if err != nil {
		return nil, fmt.Errorf("read stream names: %w", err)
	}
	defer rows.Close()
	rec := map[string]string{}
	for rows.Next() {
		var idHex, name string
		if err := rows.Scan(&idHex, &name); err != nil {
			return nil, fmt.Errorf("read stream names: %w", err)
		}
		id, err := hex.DecodeString(idHex)
		if err != nil {
			return nil, fmt.Errorf("read stream names: id %q: %w", idHex, err)
		}
		rec[string(id)] = name
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read stream names: %w", err)
	}
	return NewNames(rec), nil
}

// recordName keeps a table's id -> name pair (first run wins).
func recordName(ctx context.Context, tx *sql.Tx, runID string, t Table) error {
	id := t.ServiceID
	if id == "" {
		id = t.Object
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO _sepipe_names VALUES (?, ?, ?, ?) ON CONFLICT (id_hex) DO NOTHING`,
		hex.EncodeToString([]byte(id)), validText(id), t.Object, runID); err != nil {
		return &WriteError{Object: t.Object, Step: "record name", Path: "_sepipe_names", Err: err}
	}
	return nil
}
