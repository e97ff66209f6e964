package main

import (
	"errors"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/load"
	"github.com/sepipe/sepipe/pipeline"
)

// hint returns one line telling the user what to do about err, or "".
func hint(err error) string {
	switch {
	case errors.Is(err, extract.ErrUnauthorized):
		return "check SEPIPE_ACCESS_TOKEN: the service refused it (missing, wrong or expired)"
	case errors.Is(err, extract.ErrForbidden):
		return "the token is valid but lacks access to Coach reports: it needs a Coach license and an Admin or Manager role"
	case errors.Is(err, load.ErrWarehouseLocked):
		return "another program has warehouse.duckdb open for writing; close it (or its duckdb shell) and retry"
	case errors.Is(err, pipeline.ErrBusy):
		return "another sepipe run is writing this output folder; wait for it or use another --out"
	case errors.Is(err, pipeline.ErrUnknownObject):
		return "run 'sepipe demo' or check the object ids the service lists"
	}
	return ""
}
