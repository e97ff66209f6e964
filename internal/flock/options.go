package flock

import (
	"errors"
	"os"
	"time"
)

// Options say how Lock waits.
type Options struct {
	// Wait is how long to wait for a lock held elsewhere: 0 not at all,
	// negative until the context ends.
	Wait time.Duration
	// Perm is the mode of a lock file Lock creates (default 0644).
	Perm os.FileMode
	// Busy is wrapped by the *HeldError of a wait that ended (default
	// ErrHeld).
	Busy error
	// Note is written after the pid into the lock file, for whoever finds
	// it held (a program name, say).
	Note string
	// Want, when set, names a second file that a waiting Lock holds a
	// shared lock on for as long as it waits (when it can open it): the
	// holder of the lock can ask Wanted(Want) whether anyone is waiting
	// for it, and give it up.
	Want string
}

// ErrHeld is the default Options.Busy.
var ErrHeld = errors.New("lock held by another process")

// HeldError: the lock at Path was still held by Holder (its pid and note,
// as it wrote them) after Waited.
type HeldError struct {
	Path, Holder string
	Waited       time.Duration
	Err          error
}

func (e *HeldError) Error() string {
	return e.Path + ": " + e.busy().Error() + " (held by " + e.Holder + ")"
}

func (e *HeldError) busy() error {
	if e.Err == nil {
		return ErrHeld
	}
	return e.Err
}

// Unwrap gives Options.Busy.
func (e *HeldError) Unwrap() error { return e.busy() }
