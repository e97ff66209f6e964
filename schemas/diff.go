package schemas

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sepipe/sepipe/service"
)

// ChangeKind says how a field changed between two describes.
type ChangeKind string

const (
	FieldAdded     ChangeKind = "added"
	FieldRemoved   ChangeKind = "removed"
	TypeChanged    ChangeKind = "type changed"
	OptionsChanged ChangeKind = "options changed"
)

// Change is one field's difference between the stored and the live describe.
type Change struct {
	Kind  ChangeKind
	Field string
	From  service.Field // zero for FieldAdded
	To    service.Field // zero for FieldRemoved
}

func (c Change) String() string {
	switch c.Kind {
	case FieldAdded:
		return fmt.Sprintf("+%s (%s)", c.Field, c.To.Type)
	case FieldRemoved:
		return fmt.Sprintf("-%s (%s)", c.Field, c.From.Type)
	case TypeChanged:
		return fmt.Sprintf("~%s (%s -> %s)", c.Field, c.From.Type, c.To.Type)
	}
	return fmt.Sprintf("~%s (options %v -> %v)", c.Field, c.From.Options, c.To.Options)
}

// Diff is the typed difference between what the warehouse holds for an
// object and what the service describes now. It is a value: the pipeline
// decides, by the stream's contract, what to do with it.
type Diff struct {
	Object  string
	Changes []Change
}

// Empty reports whether nothing changed.
func (d Diff) Empty() bool { return len(d.Changes) == 0 }

func (d Diff) String() string {
	if d.Empty() {
		return "no changes"
	}
	parts := make([]string, len(d.Changes))
	for i, c := range d.Changes {
		parts[i] = c.String()
	}
	return strings.Join(parts, ", ")
}

// Compare returns the changes from stored to live, in live order, removed
// fields last.
func Compare(object string, stored, live []service.Field) Diff {
	d := Diff{Object: object}
	old := make(map[string]service.Field, len(stored))
	for _, f := range stored {
		old[f.ID] = f
	}
	seen := make(map[string]bool, len(live))
	for _, f := range live {
		seen[f.ID] = true
		o, ok := old[f.ID]
		switch {
		case !ok:
			d.Changes = append(d.Changes, Change{Kind: FieldAdded, Field: f.ID, To: f})
		case o.Type != f.Type:
			d.Changes = append(d.Changes, Change{Kind: TypeChanged, Field: f.ID, From: o, To: f})
		case f.Type == service.TypePicklist && !slices.Equal(o.Options, f.Options):
			d.Changes = append(d.Changes, Change{Kind: OptionsChanged, Field: f.ID, From: o, To: f})
		}
	}
	for _, f := range stored {
		if !seen[f.ID] {
			d.Changes = append(d.Changes, Change{Kind: FieldRemoved, Field: f.ID, From: f})
		}
	}
	return d
}

// Contract is what a stream does when the service's describe changes.
type Contract string

const (
	// Evolve (the default) adds new fields as nullable columns, widens a
	// changed type (int to float, anything else to string) and keeps
	// removed fields as columns that are null from then on.
	Evolve Contract = "evolve"
	// Freeze stops the stream with the diff: the warehouse keeps its shape
	// and its data until someone looks.
	Freeze Contract = "freeze"
	// Discard ignores new fields; changed types are widened as in Evolve so
	// that existing columns keep loading.
	Discard Contract = "discard"
)

// ParseContract reads a contract name; "" is Evolve.
func ParseContract(s string) (Contract, error) {
	switch Contract(s) {
	case "", Evolve:
		return Evolve, nil
	case Freeze, Discard:
		return Contract(s), nil
	}
	return "", fmt.Errorf("unknown schema contract %q (want evolve, freeze or discard)", s)
}

// ErrSchemaDrift is wrapped by *DriftError.
var ErrSchemaDrift = errors.New("schema drift")

// DriftError stops a stream whose contract is Freeze and whose describe
// changed.
type DriftError struct {
	Diff     Diff
	Contract Contract
}

func (e *DriftError) Error() string {
	return fmt.Sprintf("object %q: %v under contract %q: %s", e.Diff.Object, ErrSchemaDrift, e.Contract, e.Diff)
}

func (e *DriftError) Unwrap() error { return ErrSchemaDrift }

// Resolve decides the fields to load for an object: stored is what the
// warehouse holds (nil on the first run), live is the describe now. It
// returns the effective fields (the table's new shape), the diff, and a
// *DriftError when the contract forbids the change.
func Resolve(c Contract, object string, stored, live []service.Field) ([]service.Field, Diff, error) {
	if stored == nil {
		return live, Diff{Object: object}, nil
	}
	d := Compare(object, stored, live)
	if d.Empty() {
		return live, d, nil
	}
	if c == Freeze {
		return nil, d, &DriftError{Diff: d, Contract: c}
	}
	liveByID := make(map[string]service.Field, len(live))
	for _, f := range live {
		liveByID[f.ID] = f
	}
	eff := make([]service.Field, 0, len(stored)+len(live))
	have := make(map[string]bool, len(stored))
	for _, s := range stored {
		have[s.ID] = true
		l, ok := liveByID[s.ID]
		if !ok {
			eff = append(eff, s) // removed upstream: keep the column
			continue
		}
		f := l
		f.Type = Widen(s.Type, l.Type)
		if f.Type == service.TypePicklist {
			f.Options = unionOptions(s.Options, l.Options)
		} else {
			f.Options = nil
		}
		eff = append(eff, f)
	}
	if c == Evolve {
		for _, l := range live {
			if !have[l.ID] {
				eff = append(eff, l)
			}
		}
	}
	return eff, d, nil
}

func unionOptions(a, b []string) []string {
	out := slices.Clone(a)
	for _, o := range b {
		if !slices.Contains(out, o) {
			out = append(out, o)
		}
	}
	return out
}

// ResolveInferred decides the fields to load for a collection, whose
// fields are inferred from its items rather than described: stored is
// what the warehouse holds (nil on the first run), live what this run's
// items hold. A field missing from live is no change (items need not
// carry every field); the diff lists added and widened fields only.
//
// Under Evolve new fields are added and a changed type is widened; under
// Discard only the widening happens; under Freeze the stored fields stay
// as they are, and the caller sends the values that do not fit them to
// the rejects, keeping their rows. A live field nested under a stored
// json field is not added: the json column keeps holding it.
func ResolveInferred(c Contract, object string, stored, live []service.Field) ([]service.Field, Diff) {
	if stored == nil {
		return live, Diff{Object: object}
	}
	eff := slices.Clone(stored)
	if c != Freeze {
		byID := make(map[string]int, len(eff))
		for i, f := range eff {
			byID[f.ID] = i
		}
		var jsonPaths [][]string
		for _, f := range stored {
			if f.Type == service.TypeJSON {
				jsonPaths = append(jsonPaths, fieldPath(f))
			}
		}
		for _, l := range live {
			if i, ok := byID[l.ID]; ok {
				eff[i].Type = Widen(eff[i].Type, l.Type)
				continue
			}
			if c != Evolve || under(fieldPath(l), jsonPaths) {
				continue
			}
			byID[l.ID] = len(eff)
			eff = append(eff, l)
		}
	}
	d := Compare(object, stored, eff)
	d.Changes = slices.DeleteFunc(d.Changes, func(ch Change) bool { return ch.Kind == FieldRemoved })
	if c == Freeze {
		d = Compare(object, stored, live)
		d.Changes = slices.DeleteFunc(d.Changes, func(ch Change) bool {
			return ch.Kind == FieldRemoved || (ch.Kind == TypeChanged && Widen(ch.From.Type, ch.To.Type) == ch.From.Type)
		})
	}
	return eff, d
}

func fieldPath(f service.Field) []string {
	if len(f.Path) > 0 {
		return f.Path
	}
	return []string{f.ID}
}

// under reports whether p lies strictly below one of the paths.
func under(p []string, paths [][]string) bool {
	for _, q := range paths {
		if len(p) > len(q) && slices.Equal(p[:len(q)], q) {
			return true
		}
	}
	return false
}
