package main

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"
	"time"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/lakehouse"
	"github.com/sepipe/sepipe/load"
	"github.com/sepipe/sepipe/pipeline"
	"github.com/sepipe/sepipe/webhooks"
)

// hint returns one line telling the user what to do about err, or "".
func hint(err error) string {
	var ce *ConfigError
	if errors.As(err, &ce) {
		return configHint(ce)
	}
	var whErr *lakehouse.WarehouseError
	var ae *extract.APIError
	if errors.As(err, &ae) && ae.Interface == extract.IfaceWebhooks && errors.Is(err, extract.ErrUnauthorized) {
		return "check SEPIPE_API_TOKEN (or credentials.api_token): the webhooks API refused the developer API token"
	}
	switch {
	case errors.Is(err, webhooks.ErrListening):
		return "another 'sepipe listen' is receiving into this folder; stop it or use another --out"
	case refreshRefused(err):
		// Before ErrUnauthorized: a 401 whose refresh was refused wraps both,
		// and only sepipe auth login mends it.
		return "the refresh token was refused (used already, expired or revoked): authorize again with 'sepipe auth login --out DIR' for this output folder"
	case extract.RefreshOutage(err):
		// Before ErrUnauthorized too: the access token expired and the
		// token endpoint could not give a new one; nothing is wrong with
		// the tokens.
		return "the token endpoint failed while refreshing the access token (the message says how); a later run tries again ('sepipe schedule' retries a failed run): check the service's status if it persists"
	case extract.RefreshRefused(err):
		return "the token endpoint refused to refresh the access token (the message says why): check SEPIPE_OAUTH_CLIENT_ID and SEPIPE_OAUTH_CLIENT_SECRET (service.oauth), or authorize again with 'sepipe auth login --out DIR'"
	case errors.Is(err, extract.ErrRefreshFailed):
		return "" // the token store or a missing refresh token: the message says what to do
	case errors.Is(err, extract.ErrUnauthorized):
		return "check SEPIPE_ACCESS_TOKEN: the service refused it (missing, wrong or expired)"
	case errors.Is(err, extract.ErrForbidden):
		return "the token is valid but lacks access to Coach reports: it needs a Coach license and an Admin or Manager role"
	case errors.Is(err, load.ErrPublishBlocked):
		return "open warehouse.duckdb read-only in other programs (docs/bi.md); the data is committed: 'sepipe publish' publishes it once that program is closed"
	case errors.Is(err, pipeline.ErrNotPublished):
		return "the run is committed in .sepipe/state.duckdb; 'sepipe publish' (or the next sync) publishes it once the cause is mended (disk space, permissions)"
	case errors.Is(err, lakehouse.ErrDataFileLost):
		return "a data file of an Iceberg table is gone from storage (a lifecycle rule, a mistake): 'sepipe sync --full-refresh STREAM', as the message says, rebuilds that table from a full read; the other streams keep committing meanwhile"
	case errors.Is(err, pipeline.ErrLakePending):
		return "the warehouse and the local lake have the run; the next sync commits it to the Iceberg lake (check the catalog and the object store are reachable)"
	case errors.Is(err, load.ErrNotDuckDB):
		return "sepipe writes warehouse.duckdb itself, and adopts one only from an earlier sepipe: move that file away, or choose another output folder (--out or output.dir)"
	case errors.Is(err, load.ErrWarehouseLocked):
		return "another process holds the file for writing (the message names it): wait for that sepipe to finish, or close that program (readers must open warehouse.duckdb read-only, never .sepipe/), and retry"
	case errors.Is(err, pipeline.ErrBusy):
		return "another sepipe run is writing this output folder; wait for it or use another --out"
	case errors.Is(err, pipeline.ErrUnknownObject):
		return "run 'sepipe discover' to list the object ids the service has"
	case errors.As(err, &whErr) && whErr.Local():
		return "the Iceberg warehouse (output.lake.iceberg.warehouse) must be a folder sepipe can create and write; the output folder is not at fault"
	case errors.As(err, &whErr):
		return "the Iceberg warehouse (output.lake.iceberg.warehouse) cannot be written: check the bucket, s3.endpoint, s3.region and the AWS credentials in the environment"
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EROFS):
		return "the output folder (--out or output.dir) must be a folder sepipe can create and write"
	}
	return quotaHint(err)
}

// quotaHint says when to run again when err is a run whose streams a
// request quota deferred, or "".
func quotaHint(err error) string {
	var re *pipeline.RunError
	if !errors.As(err, &re) {
		return ""
	}
	var big string
	if ids := re.Exceeds(); len(ids) > 0 {
		big = fmt.Sprintf("%s need more requests than the service's quota allows in a whole window: %s", termEscape(strings.Join(ids, ", "), false), extract.ExceedsAdvice)
		if len(ids) == len(re.Deferred) {
			return big
		}
		big += "; "
	}
	at, ok := re.ResumeAt()
	switch {
	case !ok:
		return strings.TrimSuffix(big, "; ")
	case !at.After(time.Now()):
		return big + "the service's request quota has reset since: a sync now continues the deferred streams"
	}
	return big + "the service's request quota resets at " + at.UTC().Format(time.RFC3339) +
		": a sync after it continues the deferred streams ('sepipe schedule' continues them itself)"
}

// configHint says what to do about a fault in sepipe.yaml or a flag.
func configHint(ce *ConfigError) string {
	switch {
	case strings.Contains(ce.Msg, "unknown report object"):
		return "run 'sepipe discover' to list the object ids the service has"
	case strings.Contains(ce.Key, "filters"):
		return "run 'sepipe describe OBJECT' for its fields, their types and picklist options"
	case strings.HasSuffix(ce.Key, "cron") || strings.Contains(ce.Msg, "cron expression"):
		return "e.g. \"0 2 * * *\" runs at 02:00 every day; with 6 fields the first is seconds"
	case strings.Contains(ce.Msg, "is not set"):
		return "export the variable in the environment sepipe runs in (for systemd: EnvironmentFile=)"
	case strings.HasPrefix(ce.Msg, "not valid YAML"):
		return "check the indentation (spaces, not tabs) around that line"
	case ce.File != "":
		return "sepipe.example.yaml and docs/cli.md list every key"
	}
	return ""
}

// refreshRefused reports whether err is a refresh token the token endpoint
// refused (invalid_grant: used already, expired or revoked), which only a
// new authorization mends, as against an outage of the endpoint.
func refreshRefused(err error) bool {
	return extract.RefreshRefused(err) && strings.Contains(err.Error(), "invalid_grant")
}
