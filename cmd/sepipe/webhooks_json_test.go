package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sepipe/sepipe/extract"
)

// `sepipe webhooks list --format json` (and get, create, update, which
// print subscriptionJSON's map) leaves out a time extract could not read
// (zero), where it printed 0001-01-01T00:00:00Z (found by review).
func TestWebhooksListJSONLeavesOutUnreadTimes(t *testing.T) {
	var out bytes.Buffer
	if err := printSubscriptionsAs(&out, "json", []extract.Subscription{{ID: "01A", Name: "n"}}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "0001-01-01") {
		t.Errorf("webhooks list --format json: %s", out.String())
	}
}
