package service

import (
	"encoding/json"
	"time"
)

// Event is one webhook event as the service sends it and the receiver
// took it in.
type Event struct {
	ID          string
	Type        string
	SpecVersion int
	Time        time.Time // zero when the event has none
	Data        json.RawMessage
	// Raw is the event's JSON: the body as received for POST; for GET, an
	// object rebuilt from the query parameters in the body's shape.
	Raw []byte
	// Subscription is the delivery URL's ?subscription= value, or "".
	Subscription string
	ReceivedAt   time.Time
}
