package schemas

import (
	"errors"
	"fmt"
)

// ErrNoFields: a report object's describe lists no fields, so its stream
// has no column to load (FromDescribe refuses it; the load refuses a
// schema without fields too, before it builds any SQL).
var ErrNoFields = errors.New("the stream has no fields")

// ErrUnknownType is wrapped by every *UnknownTypeError.
var ErrUnknownType = errors.New("unknown field type")

// UnknownTypeError reports a field whose service type has no Arrow mapping.
type UnknownTypeError struct {
	Object string // report object id
	Field  string // field id
	Type   string // the type string the service sent
}

func (e *UnknownTypeError) Error() string {
	return fmt.Sprintf("object %q field %q: %v %q (known: int, float, percent, string, picklist, date)",
		e.Object, e.Field, ErrUnknownType, e.Type)
}

func (e *UnknownTypeError) Unwrap() error { return ErrUnknownType }

// FieldError reports a describe entry that cannot become a column for a
// reason other than its type: an empty or duplicate id.
type FieldError struct {
	Object string
	Field  string
	Reason string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("object %q field %q: %s", e.Object, e.Field, e.Reason)
}
