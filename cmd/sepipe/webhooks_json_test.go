package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sepipe/sepipe/extract"
)

// 3527ee9 says `sepipe webhooks list --format json` no longer prints an
// unread time (left zero by extract) as 0001-01-01T00:00:00Z, and adds
// omitzero to Subscription's tags. But list (and get, create, update)
// print subscriptionJSON's map, which puts s.CreatedAt and s.UpdatedAt in
// as time.Time values: omitzero does not apply, the year 1 is printed.
func TestWebhooksListJSONLeavesOutUnreadTimes(t *testing.T) {
	var out bytes.Buffer
	if err := printSubscriptionsAs(&out, "json", []extract.Subscription{{ID: "01A", Name: "n"}}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "0001-01-01") {
		t.Errorf("webhooks list --format json: %s", out.String())
	}
}
