package pipeline

// SetCrashHook lets the kill tests stop a run at a named point.
func SetCrashHook(f func(point string)) { crashHook = f }
