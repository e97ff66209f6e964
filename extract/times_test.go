package extract

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// The typed items read their times in every ISO 8601 form the sync's
// decoder reads (basic offset, no zone, a space for T), and keep an item
// whose time is in none: the field is zero (nil), the other fields and
// Extra as they are.
func TestItemTimesInISO8601Forms(t *testing.T) {
	t.Parallel()
	want := time.Date(2026, 3, 5, 9, 53, 27, 123e6, time.UTC)
	for _, form := range []string{"2026-03-05T09:53:27.123Z", "2026-03-05T11:53:27.123+0200", "2026-03-05T11:53:27.123+02",
		"2026-03-05T09:53:27.123", "2026-03-05 09:53:27.123z"} {
		q, _ := json.Marshal(form)
		var sh Share
		var th Theme
		var sub Subscription
		var l DeliveryLog
		for _, c := range []struct {
			v    any
			body string
			got  func() []time.Time
		}{
			{&sh, `{"id":"s1","expiresAt":` + string(q) + `,"createdAt":` + string(q) + `,"more":1}`,
				func() []time.Time { return []time.Time{*sh.ExpiresAt, sh.CreatedAt} }},
			{&th, `{"id":"t1","createdAt":` + string(q) + `,"UPDATEDAT":` + string(q) + `,"more":1}`,
				func() []time.Time { return []time.Time{th.CreatedAt, th.UpdatedAt} }},
			{&sub, `{"id":"01J","createdAt":` + string(q) + `,"updatedAt":` + string(q) + `,"more":1}`,
				func() []time.Time { return []time.Time{sub.CreatedAt, sub.UpdatedAt} }},
			{&l, `{"id":"l1","deliveredAt":` + string(q) + `,"more":1}`,
				func() []time.Time { return []time.Time{l.DeliveredAt} }},
		} {
			if err := json.Unmarshal([]byte(c.body), c.v); err != nil {
				t.Fatalf("%T of %s: %v", c.v, c.body, err)
			}
			for _, got := range c.got() {
				if !got.Equal(want) {
					t.Errorf("%T of %s: %v, want %v", c.v, c.body, got, want)
				}
			}
		}
		if sh.ID != "s1" || th.ID != "t1" || sub.ID != "01J" || l.ID != "l1" || string(l.Extra) != `{"more":1}` || string(th.Extra) != `{"more":1}` {
			t.Errorf("items %+v %+v %+v %+v", sh, th, sub, l)
		}
	}
	for _, odd := range []string{`"last Tuesday"`, `1772712807`, `null`, `""`, `{"at":"2026-03-05"}`} {
		var sh Share
		var l DeliveryLog
		if err := json.Unmarshal([]byte(`{"id":"s1","expiresAt":`+odd+`,"createdAt":`+odd+`}`), &sh); err != nil ||
			sh.ID != "s1" || sh.ExpiresAt != nil || !sh.CreatedAt.IsZero() {
			t.Errorf("share with times %s: %+v, %v", odd, sh, err)
		}
		if err := json.Unmarshal([]byte(`{"id":"l1","deliveredAt":`+odd+`,"outcome":"failed"}`), &l); err != nil ||
			l.ID != "l1" || l.Outcome != "failed" || !l.DeliveredAt.IsZero() || l.Extra != nil {
			t.Errorf("log entry with time %s: %+v, %v", odd, l, err)
		}
	}
	var th Theme
	if err := json.Unmarshal([]byte(`[1]`), &th); err == nil {
		t.Error("a theme that is not an object decoded")
	}
}

// TestUnreadTimesAreLeftOutOfJSON: a subscription or delivery log entry
// whose time was in no ISO 8601 form (left zero) prints without it in
// `sepipe webhooks list --format json`, not as created in the year 1.
func TestUnreadTimesAreLeftOutOfJSON(t *testing.T) {
	t.Parallel()
	for _, v := range []any{Subscription{ID: "01A"}, DeliveryLog{ID: "l1"}} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "0001-01-01") {
			t.Errorf("%T with an unread time: %s", v, b)
		}
	}
	b, _ := json.Marshal(Subscription{ID: "01B", CreatedAt: time.Date(2026, 3, 5, 9, 53, 27, 0, time.UTC)})
	if !strings.Contains(string(b), `"createdAt":"2026-03-05T09:53:27Z"`) {
		t.Errorf("a read time left out: %s", b)
	}
}
