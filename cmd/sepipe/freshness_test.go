package main

import (
	"testing"
	"time"
)

// TestScheduleMaxAge: a stream is stale after the schedule's longest gap
// between runs plus a twelfth (at least 30 minutes): what sepipe status
// and dbt's source freshness take without --max-age.
func TestScheduleMaxAge(t *testing.T) {
	for spec, want := range map[string]time.Duration{
		"0 2 * * *":    26 * time.Hour,
		"@daily":       26 * time.Hour,
		"@hourly":      90 * time.Minute,
		"@every 15m":   45 * time.Minute,
		"30 6 * * 1-5": 78 * time.Hour, // Friday to Monday, and a twelfth of it
	} {
		c := &Config{Schedule: ScheduleConfig{Cron: spec, TimeZone: "UTC"}}
		got, err := scheduleMaxAge(c)
		if err != nil || got != want {
			t.Errorf("%s: %v %v, want %v", spec, got, err, want)
		}
	}
	c := &Config{Schedule: ScheduleConfig{Cron: "not cron", TimeZone: "UTC"}}
	if _, err := scheduleMaxAge(c); err == nil {
		t.Error("a bad cron expression is accepted")
	}
}
