package load

import (
	"context"
	"errors"
	"fmt"
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
		return nil, fmt.Errorf("%s: %w: another sepipe process (pid %s) has been writing for longer than %s",
			path, ErrWarehouseLocked, strings.TrimSpace(h.Holder), wait)
	}
	return unlock, err
}
