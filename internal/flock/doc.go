// Package flock takes the advisory file locks that keep two sepipe
// processes from doing one job at once: a run or a listener on an output
// folder, a token refresh on the token file, a writer on the warehouse.
// TryLock fails at once when the lock is held; Lock waits (bounded by
// Options.Wait and the context) and reports who holds it through
// Options.Busy and HeldError; a Lock that waits with Options.Want tells
// the holder, which asks Wanted, that someone is waiting. The kernel
// drops a lock when its process dies, so a killed process never leaves
// one stuck. Where flock(2) is not available the locks are no-ops
// (Available is false, and Wanted never answers yes).
//
// Imports nothing of sepipe's.
package flock
