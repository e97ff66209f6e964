package pipeline_test

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/extract/servicetest"
	"github.com/sepipe/sepipe/pipeline"
)

// TestSyncReleasesEveryBatch runs syncs with arrow-go's checked allocator
// (Config.Allocator, which the decoders, the Parquet writers and the
// Iceberg stage writers take) and requires nothing left allocated at the
// end: every record batch the run made, and every buffer of its writers,
// was released, on the paths a run takes (issue 41: no pipeline test set
// an allocator, though the pipeline is where batches are released).
func TestSyncReleasesEveryBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// failPage answers 500 to every request for page 2 of object: the
	// stream fails mid-read, its sink aborted (the retries given up).
	failPage := func(svc http.Handler, object string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			params, _ := base64.StdEncoding.DecodeString(r.URL.Query().Get("parameters"))
			if strings.HasSuffix(r.URL.Path, "/objects/"+object) && strings.Contains(string(params), `"page":2,`) {
				w.WriteHeader(http.StatusInternalServerError)
				io.WriteString(w, `{"response":{"code":5000,"name":"InternalError","message":"down"}}`)
				return
			}
			svc.ServeHTTP(w, r)
		})
	}
	for _, tc := range []struct {
		name    string
		streams map[string]pipeline.StreamConfig
		iceberg bool
		handler func(http.Handler) http.Handler
		cancel  bool
		wantErr bool
	}{
		{name: "report objects and collections"},
		{name: "merge and append streams, and an Iceberg lake", streams: lakeStreams, iceberg: true},
		{name: "a stream that fails mid-read", handler: func(h http.Handler) http.Handler { return failPage(h, "userCourseProgress") }, wantErr: true},
		{name: "a cancelled run", cancel: true, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			svc := servicetest.NewServer(servicetest.WithUsers(60))
			defer svc.Close()
			var h http.Handler = svc.Service
			if tc.handler != nil {
				h = tc.handler(h)
			}
			srv := httptest.NewServer(h)
			defer srv.Close()
			c := client(t, srv.URL, svc.Service.AccessToken(), extract.WithPageSize(100), extract.WithRetry(1, time.Second))
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			used := &countingAllocator{Allocator: mem}
			cfg := pipeline.Config{Out: t.TempDir(), Streams: tc.streams, Allocator: used, Now: clock(day1)}
			if tc.iceberg {
				cfg.Iceberg = fileLake(t.TempDir())
			}
			if tc.cancel {
				var pages atomic.Int64
				cfg.Progress = &cancelOnPage{n: &pages, at: 3, cancel: cancel}
			}
			_, err := pipeline.Sync(ctx, c, cfg)
			if (err != nil) != tc.wantErr {
				t.Fatalf("sync: %v (want an error: %v)", err, tc.wantErr)
			}
			if tc.cancel && !errors.Is(err, context.Canceled) {
				t.Fatalf("sync: %v, want cancelled", err)
			}
			var re *pipeline.RunError
			if tc.handler != nil && (!errors.As(err, &re) || len(re.Failed) != 1 || re.Failed[0].Object != "userCourseProgress") {
				t.Fatalf("sync: %v, want userCourseProgress alone failed", err)
			}
			if used.n.Load() == 0 {
				t.Fatal("the run allocated nothing through Config.Allocator: the test proves nothing")
			}
		})
	}
}

// cancelOnPage cancels the run at its at-th page.
type cancelOnPage struct {
	n      *atomic.Int64
	at     int64
	cancel context.CancelFunc
}

func (c *cancelOnPage) ObjectStarted(string) {}
func (c *cancelOnPage) PageDone(string, int, int, int) {
	if c.n.Add(1) == c.at {
		c.cancel()
	}
}
func (c *cancelOnPage) ObjectDone(pipeline.ObjectResult) {}

// countingAllocator counts the allocations made through it.
type countingAllocator struct {
	memory.Allocator
	n atomic.Int64
}

func (c *countingAllocator) Allocate(size int) []byte {
	c.n.Add(1)
	return c.Allocator.Allocate(size)
}
