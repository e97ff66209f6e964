package pipeline

import (
	"errors"
	"fmt"
	"slices"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/load"
)

// Statuses of a stream in a run's result (ObjectResult.Status), as in
// _sepipe_run_objects.
const (
	StatusOK       = load.StreamCommitted
	StatusFailed   = load.StreamFailed
	StatusSkipped  = load.StreamSkipped
	StatusDeferred = load.StreamDeferred
)

// streamInterface is the interface a stream is read from.
// StreamInterface names the interface stream id is read from
// (extract.IfaceReporting for a report object).
func StreamInterface(id string) string { return streamInterface(id) }

func streamInterface(id string) string {
	switch id {
	case StreamThemes:
		return extract.IfaceV4
	case StreamAssets:
		return extract.IfaceV3
	case StreamSubscriptions, StreamDeliveryLogs:
		return extract.IfaceWebhooks
	}
	return extract.IfaceReporting
}

// notEntitled reports whether err says the tenant may not use the
// interface err came from: a 403 (no licence, plan or role), or a 404 for
// a whole collection (the interface is not there). A 404 for one report
// object is not: the object is gone, which is a failure.
func notEntitled(err error, collection bool) bool {
	var ae *extract.APIError
	if !errors.As(err, &ae) {
		return false
	}
	return ae.Status == 403 || ae.Status == 404 && collection
}

// classify turns a stream's failure into its status: skipped (not
// entitled), deferred (the quota would not cover it) or failed.
func classify(id string, err error) string {
	switch {
	case errors.Is(err, extract.ErrQuotaExhausted):
		return StatusDeferred
	case notEntitled(err, isCollection(id)):
		return StatusSkipped
	}
	return StatusFailed
}

// skippedNote is the one warning a run gives for an interface the tenant
// is not entitled to, naming what it needs.
func skippedNote(iface string, streams []string, err error) string {
	return fmt.Sprintf("%s interface not available to this tenant; its streams %v are skipped and keep their last good data: %v",
		iface, streams, err)
}

// outcome is a stream that did not commit.
type outcome struct {
	object string
	status string
	err    error
}

func (o outcome) record() load.StreamOutcome {
	return load.StreamOutcome{Object: o.object, Status: o.status, Reason: o.err.Error()}
}

// Continuation says what a run reads on a snapshot day on which a request
// quota deferred streams: the day's unfinished streams are those deferred
// and those that failed that day, not committed since
// (load.Warehouse.Unfinished). Streams to rebuild (Config.FullRefresh)
// are read whatever it says.
type Continuation int

const (
	// ContinueOrReadAll, the default, reads the unfinished streams among
	// the run's (Config.Only, or every stream), so that a configured
	// selection is continued as the whole tenant is; when none of the
	// run's streams is unfinished (or the day has none), it reads them all.
	ContinueOrReadAll Continuation = iota
	// ReadAll reads every stream of the run, whatever the day left: for
	// streams asked for this once (sepipe sync --objects).
	ReadAll
	// ContinueOnly reads the unfinished streams among the run's, and
	// nothing when none is left: Sync then records no run and returns a
	// Result without objects (a scheduled continuation after the quota
	// reset, which a run of a new day, or a run in between, left nothing
	// to do).
	ContinueOnly
)

// streams picks a run's streams from ids (in their order) by c;
// unfinished says whether a stream is unfinished today. cont is true when
// the run continues the day rather than reading every stream.
func (c Continuation) streams(ids, fullRefresh []string, unfinished func(id string) bool) (streams []string, cont bool) {
	if c == ReadAll {
		return ids, false
	}
	for _, id := range ids {
		if unfinished(id) || slices.Contains(fullRefresh, id) {
			streams = append(streams, id)
		}
	}
	if c == ContinueOrReadAll && !slices.ContainsFunc(ids, unfinished) {
		return ids, false
	}
	return streams, true
}
