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

// streamsOf lists the streams of outcomes with the given status.
func streamsOf(outs []outcome, status string) []string {
	var ids []string
	for _, o := range outs {
		if o.status == status && !slices.Contains(ids, o.object) {
			ids = append(ids, o.object)
		}
	}
	return ids
}
