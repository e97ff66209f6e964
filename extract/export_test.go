package extract

import "time"

// WithBackoffForTest lets external tests shorten the backoff.
func WithBackoffForTest(base, cap time.Duration) Option { return withBackoff(base, cap) }

// WithOAuthClock sets the clock an OAuth source judges expiry by.
var WithOAuthClock = withOAuthClock

// WithOAuthSleep replaces the waits between a refresh's attempts.
var WithOAuthSleep = withOAuthSleep
