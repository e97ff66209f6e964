package webhooks_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sepipe/sepipe/internal/monitor"
	"github.com/sepipe/sepipe/internal/warehousetest"
	"github.com/sepipe/sepipe/internal/webhooktest"
	"github.com/sepipe/sepipe/webhooks"
)

// BenchmarkListenLoad measures the listener under sustained load, as
// issue 40 did: 100 keep-alive connections on loopback send signed events
// as fast as it acknowledges them (SEPIPE_BENCH_EVENTS, default 100,000),
// then it is stopped as SIGTERM stops it. It reports:
//
//   - acked/s: durable events acknowledged a second;
//   - verify-only-acked/s and share: a bare Go server that only checks
//     the HMAC and answers 200, under the same load, and acked/s over it;
//   - loaded/s: events loaded into the working database a second while
//     they arrived (those left for the drain not counted);
//   - backlog-events: events acknowledged and not yet loaded when the last
//     was acknowledged, and drain-s: the time the stop took to load and
//     publish them.
//
// Two ways (issue 42): unscraped, the listener alone; scraped, with its
// metrics and probes wired as sepipe listen wires them (monitor.New as
// its Observer and State, served beside the receiver on its listener)
// and a scraper GETting /metrics every second while the events arrive.
//
// Run: go test ./webhooks -run '^$' -bench BenchmarkListenLoad -benchtime 1x
func BenchmarkListenLoad(b *testing.B) {
	b.Run("unscraped", func(b *testing.B) { benchmarkListenLoad(b, false) })
	b.Run("scraped-every-1s", func(b *testing.B) { benchmarkListenLoad(b, true) })
}

func benchmarkListenLoad(b *testing.B, scraped bool) {
	events := 100_000
	if v, err := strconv.Atoi(os.Getenv("SEPIPE_BENCH_EVENTS")); err == nil && v > 0 {
		events = v
	}
	const conns = 100
	bodies := make([][]byte, events)
	for i := range bodies {
		bodies[i] = webhooktest.Event(fmt.Sprintf("bench-%07d", i))
	}
	for range b.N {
		// The verify-only server.
		verify := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			raw, err := io.ReadAll(r.Body)
			if err != nil || webhooks.VerifySignature([]string{webhooktest.Secret}, raw, r.Header.Get(webhooks.SignatureTimestampHeader),
				r.Header.Get(webhooks.SignatureHeader), time.Now(), time.Minute) != nil {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			io.WriteString(w, `{"status":"accepted"}`+"\n")
		})}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		go verify.Serve(ln)
		bare := sendAll(b, "http://"+ln.Addr().String()+"/hook", bodies, conns)
		verify.Close()

		out := b.TempDir()
		var loaded atomic.Int64
		log := slog.New(&countLoads{n: &loaded})
		cfg := webhooks.ListenConfig{Out: out, Secrets: []string{webhooktest.Secret}, Logger: log}
		if scraped {
			m := monitor.New("")
			cfg.Observer, cfg.State = m, &webhooks.ListenState{}
			m.Listen(cfg.State)
			cfg.Wrap = monitor.Beside(monitor.Handler(m, cfg.State.Ready))
		}
		url, stop := webhooktest.StartListen(b, cfg)
		var scrapes atomic.Int64
		done := make(chan struct{})
		var scraper sync.WaitGroup
		if scraped {
			scraper.Go(func() {
				tick := time.NewTicker(time.Second)
				defer tick.Stop()
				for {
					select {
					case <-done:
						return
					case <-tick.C:
					}
					resp, err := http.Get(url + "/metrics")
					if err != nil {
						b.Error(err)
						return
					}
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte("sepipe_webhook_deliveries_total")) {
						b.Errorf("scrape: %s", resp.Status)
						return
					}
					scrapes.Add(1)
				}
			})
		}
		took := sendAll(b, url+"/hook", bodies, conns)
		close(done)
		scraper.Wait()
		backlog := int64(events) - loaded.Load()
		t0 := time.Now()
		if err := stop(); err != nil {
			b.Fatal(err)
		}
		drain := time.Since(t0)
		db := warehousetest.Open(b, out)
		if n := warehousetest.Scalar[int64](b, db, `SELECT count(*) FROM events`); n != int64(events) {
			b.Fatalf("%d events stored of %d", n, events)
		}
		b.ReportMetric(float64(events)/took.Seconds(), "acked/s")
		b.ReportMetric(float64(events)/bare.Seconds(), "verify-only-acked/s")
		b.ReportMetric(bare.Seconds()/took.Seconds(), "share")
		b.ReportMetric(float64(events-int(backlog))/took.Seconds(), "loaded/s")
		b.ReportMetric(float64(backlog), "backlog-events")
		b.ReportMetric(drain.Seconds(), "drain-s")
		if scraped {
			b.ReportMetric(float64(scrapes.Load()), "scrapes")
		}
	}
}

// sendAll delivers every body, signed, over conns keep-alive connections,
// and returns the time taken; every delivery must be answered 200.
func sendAll(b *testing.B, url string, bodies [][]byte, conns int) time.Duration {
	tr := &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: time.Minute}
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Int64
	t0 := time.Now()
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(len(bodies)) {
					return
				}
				if webhooktest.Deliver(hc, url, bodies[i], webhooktest.Secret, 0) != http.StatusOK {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(t0)
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d deliveries not answered 200", n)
	}
	return took
}

// countLoads counts the events of the listener's "loaded events" lines.
type countLoads struct{ n *atomic.Int64 }

func (c *countLoads) Enabled(context.Context, slog.Level) bool { return true }
func (c *countLoads) WithAttrs([]slog.Attr) slog.Handler       { return c }
func (c *countLoads) WithGroup(string) slog.Handler            { return c }
func (c *countLoads) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "listen: loaded events" {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "events" {
				c.n.Add(a.Value.Int64())
			}
			return true
		})
	}
	return nil
}
