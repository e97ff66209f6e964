package main

import (
	"time"

	"github.com/sepipe/sepipe/internal/dbtgen"
)

// defaultMaxAge is how old a stream's last commit may be before status
// calls it stale without --max-age and without a schedule (and dbt source
// freshness warns about its tables).
const defaultMaxAge = dbtgen.DefaultWarnAfter

// scheduleMaxAge is the staleness bound of the config's schedule: its
// longest gap between two runs over the coming week (a weekday schedule's
// weekend among them), with a twelfth of it, at least 30 minutes, to
// spare for the run itself.
func scheduleMaxAge(c *Config) (time.Duration, error) {
	sched, err := parseCron(c.Schedule.Cron)
	if err != nil {
		return 0, c.errf("schedule.cron", "%v", err)
	}
	loc, err := time.LoadLocation(c.Schedule.TimeZone)
	if err != nil {
		return 0, c.errf("schedule.time_zone", "unknown time zone %q", c.Schedule.TimeZone)
	}
	now := time.Now().In(loc)
	var gap time.Duration
	prev := sched.Next(now)
	for i := 0; i < 2000 && prev.Sub(now) < 8*24*time.Hour; i++ {
		next := sched.Next(prev)
		if next.IsZero() {
			break
		}
		gap = max(gap, next.Sub(prev))
		prev = next
	}
	if gap <= 0 {
		return defaultMaxAge, nil
	}
	return gap + max(gap/12, 30*time.Minute), nil
}
