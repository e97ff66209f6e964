package load

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/sepipe/sepipe/internal/flock"
)

// lockState takes the exclusive flock that serializes sepipe's processes
// on one working database (a sync's commit, a listen's batch, a
// publish), waiting up to wait for it. The kernel drops it when the
// process dies, so a killed run never leaves it stuck. While it waits it
// says so (Warehouse.Wanted): a sync that holds the lock early, to load
// while it still fetches, gives it up.
func lockState(ctx context.Context, lake Lake, wait time.Duration) (func(), error) {
	path := lake.stateLockPath()
	unlock, err := flock.Lock(ctx, path, flock.Options{Wait: wait, Busy: ErrWarehouseLocked, Note: processName(os.Getpid()), Want: lake.stateWantPath()})
	var h *flock.HeldError
	if errors.As(err, &h) {
		return nil, fmt.Errorf("%s: %w (%w): another sepipe process (pid %s) has been writing for longer than %s",
			path, ErrWarehouseLocked, ErrHeldBySepipe, strings.TrimSpace(h.Holder), wait)
	}
	return unlock, err
}

// ProbeState reports whether the output folder's working database can be
// opened for a load now, and holds nothing after: nil; an error wrapping
// ErrWarehouseLocked and ErrHeldBySepipe while another sepipe process
// holds it (a sync, a listener's batch: it lets go when its step ends);
// or the reason it cannot (another program holds the file for writing:
// ErrWarehouseLocked, naming it; a file that is not DuckDB's). A working
// database that does not exist yet is one a run creates: nil. It opens the
// file read-only, after taking the state lock without waiting, so it
// never blocks a run, and writes nothing (readiness probes call it).
func ProbeState(ctx context.Context, lake Lake) error {
	if _, err := os.Stat(lake.StatePath()); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	unlock, err := lockState(ctx, lake, 0)
	if err != nil {
		return err
	}
	defer unlock()
	wh, err := OpenReadOnly(ctx, lake.StatePath())
	if err != nil {
		return err
	}
	return wh.Close()
}
