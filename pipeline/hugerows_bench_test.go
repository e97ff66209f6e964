package pipeline_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/pipeline"
)

// BenchmarkHugeRows syncs an object of four pages whose one row each holds
// a 200 MB string, with max_response_bytes and the in-flight budget
// raised to 256 MiB and the default MaxValueBytes (the values are kept in
// lake files, null in the table), and reports the process's peak
// resident memory (peak-RSS-MB). Run it alone: the peak is the
// process's own.
//
//	go test -run '^$' -bench 'HugeRows$' -benchtime 1x ./pipeline/
func BenchmarkHugeRows(b *testing.B) { hugeRows(b, false, 0) }

// BenchmarkHugeRowsStored is BenchmarkHugeRows with MaxValueBytes raised
// to 256 MiB: the four values go through the Parquet writers into the
// table and its history (what a user who raises the limit pays).
//
//	go test -run '^$' -bench HugeRowsStored -benchtime 1x ./pipeline/
func BenchmarkHugeRowsStored(b *testing.B) { hugeRows(b, false, 256<<20) }

// BenchmarkHugeRowsIceberg is BenchmarkHugeRows with an Iceberg lake
// (SQLite catalog, local warehouse) beside the output folder. Run it
// alone too:
//
//	go test -run '^$' -bench HugeRowsIceberg -benchtime 1x ./pipeline/
func BenchmarkHugeRowsIceberg(b *testing.B) { hugeRows(b, true, 0) }

func hugeRows(b *testing.B, iceberg bool, maxValue int) {
	const rowBytes = 200 << 20
	chunk := []byte(strings.Repeat("x", 1<<20))
	srv := httptest.NewServer(reportingOnly(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/objects"):
			fmt.Fprint(w, `{"objects":[{"id":"huge","displayName":"Huge","urls":{}}]}`)
		case strings.HasSuffix(r.URL.Path, "/describe"):
			fmt.Fprint(w, `{"fields":[{"id":"id","type":"int"},{"id":"blob","type":"string"}]}`)
		default:
			page := 1
			if raw := r.URL.Query().Get("parameters"); raw != "" {
				fmt.Sscanf(decodeParams(raw), `{"page":%d`, &page)
			}
			head := fmt.Sprintf(`{"page":%d,"resultsPerPage":1,"totalResults":4,"totalPages":4,"results":[{"id":%d,"blob":"`, page, page)
			tail := `"}]}`
			w.Header().Set("Content-Length", fmt.Sprint(len(head)+rowBytes+len(tail)))
			w.Write([]byte(head))
			for range rowBytes / len(chunk) {
				w.Write(chunk)
			}
			w.Write([]byte(tail))
		}
	}))
	defer srv.Close()
	for b.Loop() {
		c, err := extract.New(srv.URL, extract.WithAccessToken("tok-SECRET-4f1c9a"), extract.WithRateLimit(0, 1),
			extract.WithMaxResponseBytes(256<<20), extract.WithMaxBytesInFlight(256<<20), extract.WithPageSize(1))
		if err != nil {
			b.Fatal(err)
		}
		cfg := pipeline.Config{Out: b.TempDir(), Now: clock(day1), Only: []string{"huge"}, Progress: commandGC{}, MaxValueBytes: maxValue}
		if iceberg {
			cfg.Iceberg = fileLake(b.TempDir())
		}
		res, err := pipeline.Sync(context.Background(), c, cfg)
		if err != nil {
			b.Fatal(err)
		}
		if r := res.Objects[0]; r.Rows != 4 || (r.LongValues == 4) != (maxValue == 0) {
			b.Fatalf("rows %d: %+v", r.Rows, res.Objects)
		}
	}
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	b.ReportMetric(float64(ru.Maxrss)/1024, "peak-RSS-MB")
}

// commandGC applies the sync command's memory policy (cmd/sepipe's
// gcPolicy): memory goes back to the OS once an object is staged.
type commandGC struct{}

func (commandGC) ObjectStarted(string)             {}
func (commandGC) PageDone(string, int, int, int)   {}
func (commandGC) ObjectDone(pipeline.ObjectResult) { debug.FreeOSMemory() }

func decodeParams(raw string) string {
	b, err := base64Std(raw)
	if err != nil {
		return ""
	}
	return string(b)
}

func base64Std(s string) ([]byte, error) { return base64.StdEncoding.DecodeString(s) }
