package extract

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/sepipe/sepipe/service"
)

// The service documents its items' times as "ISO 8601 date-time" without
// naming one form, and writes more than RFC 3339 (which time.Time's own
// decoding takes): a basic offset (+0200), no zone at all. The typed items
// (Share, Theme, Subscription, DeliveryLog) read their times with
// service.ParseTime, the reader the sync's decoder uses, so that a list
// reads what the sync stores; one time no reader takes leaves its field
// zero (nil) and keeps the item, rather than fail the whole list.

// timeField is a date-time member of an item: its JSON name and the field
// it goes to, t for a time.Time, opt for a *time.Time (nil when null or
// unreadable).
type timeField struct {
	name string
	t    *time.Time
	opt  **time.Time
}

// unmarshalTimes is unmarshalExtra for an item with date-time members:
// the members fields name (matched case-insensitively, as encoding/json
// does) are read with service.ParseTime, the others decoded into dst as
// unmarshalExtra decodes them. A time member that is missing, null, not a
// string or in no form ParseTime reads leaves its field zero (nil).
func unmarshalTimes(b []byte, dst any, extra *json.RawMessage, fields ...timeField) error {
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return err
	}
	vals := make([]json.RawMessage, len(fields))
	rest := b
	if len(all) > 0 {
		for k, v := range all {
			for i, f := range fields {
				if strings.EqualFold(k, f.name) {
					vals[i], all[k] = v, json.RawMessage("null")
				}
			}
		}
		var err error
		if rest, err = json.Marshal(all); err != nil {
			return err
		}
	}
	if err := unmarshalExtra(rest, dst, extra); err != nil {
		return err
	}
	for i, f := range fields {
		t, ok := readTime(vals[i])
		switch {
		case f.t != nil:
			*f.t = t
		case ok:
			*f.opt = &t
		default:
			*f.opt = nil
		}
	}
	return nil
}

// readTime reads a JSON string holding an ISO 8601 date-time; ok is false
// (and t zero) for anything else.
func readTime(raw json.RawMessage) (t time.Time, ok bool) {
	var s string
	if len(raw) == 0 || json.Unmarshal(raw, &s) != nil {
		return time.Time{}, false
	}
	return service.ParseTime(s)
}
