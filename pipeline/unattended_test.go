package pipeline_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/extract/servicetest"
	"github.com/sepipe/sepipe/internal/warehousetest"
	"github.com/sepipe/sepipe/pipeline"
)

var allCollections = []string{pipeline.StreamThemes, pipeline.StreamAssets, pipeline.StreamSubscriptions, pipeline.StreamDeliveryLogs}

// reportObjects are the fake tenant's report objects.
var reportObjects = []string{"course", "path", "curriculum", "user", "userCourseProgress"}

func statusOf(t *testing.T, out, run, object string) (status, reason string) {
	t.Helper()
	db := warehousetest.Open(t, out)
	status = warehousetest.Scalar[string](t, db, `SELECT status FROM _sepipe_run_objects WHERE run_id = ? AND object = ?`, run, object)
	reason = warehousetest.Scalar[string](t, db, `SELECT coalesce(reason, '') FROM _sepipe_run_objects WHERE run_id = ? AND object = ?`, run, object)
	return status, reason
}

// TestLimitedTokenSyncsWhatTheTenantMay: a token without the Coach licence
// (reporting answers 403) still syncs assets, themes and the webhook
// streams; the report objects are skipped, keep their last good data, and
// the run is partial with the reason recorded.
func TestLimitedTokenSyncsWhatTheTenantMay(t *testing.T) {
	t.Parallel()
	srv := servicetest.NewServer(servicetest.WithUsers(20), servicetest.WithSeed(3))
	defer srv.Close()
	out := t.TempDir()
	ctx := context.Background()
	api := extract.WithAPIToken(srv.Service.APIToken())
	if _, err := pipeline.Sync(ctx, client(t, srv.URL, srv.Service.AccessToken(), api), pipeline.Config{Out: out, Now: clock(day1)}); err != nil {
		t.Fatal(err)
	}
	coursesBefore := warehousetest.Scalar[int64](t, warehousetest.Open(t, out), `SELECT count(*) FROM course`)

	res, err := pipeline.Sync(ctx, client(t, srv.URL, srv.Service.LimitedToken(), api), pipeline.Config{Out: out, Now: clock(day1.Add(24 * time.Hour))})
	var re *pipeline.RunError
	if !errors.As(err, &re) || !re.Partial || len(re.Failed) != 0 {
		t.Fatalf("limited token: %v, want a partial run with nothing failed", err)
	}
	if len(re.Skipped) != 5 {
		t.Fatalf("skipped %d streams, want the 5 report objects: %v", len(re.Skipped), err)
	}
	if !errors.Is(err, extract.ErrForbidden) {
		t.Errorf("the run error does not wrap the 403: %v", err)
	}
	for _, c := range allCollections {
		if o := objectResult(t, res, c); o.Status != pipeline.StatusOK || o.Err != nil {
			t.Errorf("%s: status %s, err %v; want committed", c, o.Status, o.Err)
		}
		if s, _ := statusOf(t, out, res.RunID, c); s != "committed" {
			t.Errorf("%s recorded as %q", c, s)
		}
	}
	for _, o := range []string{"course", "path", "curriculum", "user", "userCourseProgress"} {
		if r := objectResult(t, res, o); r.Status != pipeline.StatusSkipped {
			t.Errorf("%s: status %q, want skipped", o, r.Status)
		}
		s, reason := statusOf(t, out, res.RunID, o)
		if s != "skipped" || !strings.Contains(reason, "403") || !strings.Contains(reason, "Coach") {
			t.Errorf("%s recorded as %q (%s), want skipped naming the 403 and the Coach licence", o, s, reason)
		}
	}
	db := warehousetest.Open(t, out)
	if n := warehousetest.Scalar[int64](t, db, `SELECT count(*) FROM course`); n != coursesBefore || n == 0 {
		t.Errorf("course holds %d rows after the skipped run, want its last good %d", n, coursesBefore)
	}
	if s := warehousetest.Scalar[string](t, db, `SELECT status FROM _sepipe_runs WHERE run_id = ?`, res.RunID); s != "partial" {
		t.Errorf("run status %q, want partial", s)
	}
}

// TestTenantWithoutV4SkipsThemes: a plan without the sharing interface
// skips themes and syncs everything else.
func TestTenantWithoutV4SkipsThemes(t *testing.T) {
	t.Parallel()
	srv := servicetest.NewServer(servicetest.WithUsers(20), servicetest.WithoutV4())
	defer srv.Close()
	out := t.TempDir()
	res, err := pipeline.Sync(context.Background(), client(t, srv.URL, srv.Service.AccessToken()),
		pipeline.Config{Out: out, Now: clock(day1)})
	var re *pipeline.RunError
	if !errors.As(err, &re) || !re.Partial || len(re.Skipped) != 1 || len(re.Failed) != 0 {
		t.Fatalf("%v: want a partial run that skipped themes only", err)
	}
	if o := objectResult(t, res, pipeline.StreamThemes); o.Status != pipeline.StatusSkipped {
		t.Errorf("themes: %s", o.Status)
	}
	for _, o := range []string{"course", "userCourseProgress", pipeline.StreamAssets} {
		if r := objectResult(t, res, o); r.Status != pipeline.StatusOK {
			t.Errorf("%s: %s %v", o, r.Status, r.Err)
		}
	}
}

// The tenant and the client of the tests against a limited service.
const limitedUsers, limitedSeed = 40, 5

func limitedOpts() []extract.Option {
	return []extract.Option{extract.WithPageSize(100), extract.WithConcurrency(2), extract.WithRetry(6, 300*time.Millisecond)}
}

// syncUnlimited syncs only of the limited tests' tenant from a fake
// without a limit into out, and returns the requests it took.
func syncUnlimited(t *testing.T, out string, only []string) int {
	t.Helper()
	clean := servicetest.NewServer(servicetest.WithUsers(limitedUsers), servicetest.WithSeed(limitedSeed))
	defer clean.Close()
	c := client(t, clean.URL, clean.Service.AccessToken(), limitedOpts()...)
	if _, err := pipeline.Sync(context.Background(), c, pipeline.Config{Out: out, Only: only, Now: clock(day1)}); err != nil {
		t.Fatal(err)
	}
	return int(clean.Service.Requests())
}

// TestHourlyLimitDefers: a service that limits requests per hour and says
// so only in its 429s (Retry-After: the rest of the hour). A request that
// meets one does not wait an hour, and its stream is not failed: it is
// deferred, as under an announced quota, and the streams read before the
// limit commit.
func TestHourlyLimitDefers(t *testing.T) {
	t.Parallel()
	limit := syncUnlimited(t, t.TempDir(), reportObjects) / 2

	srv := servicetest.NewServer(servicetest.WithUsers(limitedUsers), servicetest.WithSeed(limitedSeed),
		servicetest.WithRateLimit(limit), servicetest.WithRateWindow(time.Hour))
	defer srv.Close()
	out := t.TempDir()
	start := time.Now()
	res, err := pipeline.Sync(context.Background(), client(t, srv.URL, srv.Service.AccessToken(), limitedOpts()...), pipeline.Config{Out: out, Only: reportObjects, Now: clock(day1)})
	end := time.Now()
	var re *pipeline.RunError
	if !errors.As(err, &re) || !re.Partial || len(re.Deferred) == 0 || len(re.Failed) != 0 {
		t.Fatalf("a limit of %d requests an hour: %v; want a partial run that deferred streams and failed none", limit, err)
	}
	if !errors.Is(err, extract.ErrQuotaExhausted) {
		t.Errorf("the run error does not wrap ErrQuotaExhausted: %v", err)
	}
	if d := time.Since(start); d > time.Minute {
		t.Errorf("the run took %s: it waited for the hour", d)
	}
	if at, ok := re.ResumeAt(); !ok || at.Before(end) || at.After(end.Add(time.Hour+time.Second)) {
		t.Errorf("ResumeAt %s, %v: want the end of the hour the limit counts, after now", at, ok)
	}
	for _, d := range re.Deferred {
		if s, reason := statusOf(t, out, res.RunID, d.Object); s != "deferred" || !strings.Contains(reason, "quota") {
			t.Errorf("%s recorded as %q (%s)", d.Object, s, reason)
		}
	}
	if len(re.Deferred) == len(reportObjects) {
		t.Errorf("every stream deferred: none of the %d requests the hour allows was used", limit)
	}
}

// TestSameDayRerunRetriesTheFailedToo: a day on which one stream failed
// and a quota deferred others. The next run of the day continues the
// deferred streams and retries the failed one; what committed that day is
// not read again.
func TestSameDayRerunRetriesTheFailedToo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	out := t.TempDir()
	wire := servicetest.HostileRepeatedPage
	sync := func(srv *servicetest.Server, only ...string) (*pipeline.Result, error) {
		t.Helper()
		c := client(t, srv.URL, srv.Service.AccessToken(), extract.WithPageSize(50), extract.WithRetry(6, 300*time.Millisecond))
		return pipeline.Sync(ctx, c, pipeline.Config{Out: out, Now: clock(day1), Only: only})
	}
	// The day's first run: the hostile object fails, course commits.
	hostile := servicetest.NewServer(servicetest.WithUsers(10), servicetest.WithHostileWire(wire))
	defer hostile.Close()
	if _, err := sync(hostile, "course", wire.ObjectID()); err == nil {
		t.Fatal("the hostile object's stream did not fail")
	}
	// The second: an hourly limit of one request defers user.
	limited := servicetest.NewServer(servicetest.WithUsers(10), servicetest.WithRateLimit(1), servicetest.WithRateWindow(time.Hour))
	defer limited.Close()
	var re *pipeline.RunError
	if _, err := sync(limited, "user"); !errors.As(err, &re) || len(re.Deferred) != 1 {
		t.Fatalf("second run: %v; want user deferred", err)
	}
	// The third, told nothing: the deferred and the failed stream only.
	res, _ := sync(hostile)
	var read []string
	for _, o := range res.Objects {
		read = append(read, o.Object)
	}
	slices.Sort(read)
	if want := []string{"user", wire.ObjectID()}; !slices.Equal(read, want) {
		t.Errorf("the rerun read %v, want %v (the deferred and the failed stream, not course)", read, want)
	}
}

// TestQuotaDefersThenNextRunContinues: a tenant whose request quota is
// smaller than a full sync. sepipe draws no 429: the first run commits the
// streams the quota covers and defers the rest, the next run of the day
// (after the window reset) continues them, and the two together equal one
// clean sync.
func TestQuotaDefersThenNextRunContinues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	opts := limitedOpts()
	want := t.TempDir()
	full := syncUnlimited(t, want, append(slices.Clone(reportObjects), pipeline.StreamAssets))
	quota := full * 2 / 3

	const window = 1500 * time.Millisecond
	srv := servicetest.NewServer(servicetest.WithUsers(limitedUsers), servicetest.WithSeed(limitedSeed), servicetest.WithQuota(quota, window))
	defer srv.Close()
	got := t.TempDir()
	// (Themes hold URLs on the server's own address, which differs between
	// the two fakes; assets and the report objects do not.)
	cfg := pipeline.Config{Out: got, Only: append(slices.Clone(reportObjects), pipeline.StreamAssets), Now: clock(day1)}
	c := client(t, srv.URL, srv.Service.AccessToken(), opts...)
	res, err := pipeline.Sync(ctx, c, cfg)
	var re *pipeline.RunError
	if !errors.As(err, &re) || !re.Partial || len(re.Deferred) == 0 || len(re.Failed) != 0 {
		t.Fatalf("first run (quota %d of a %d-request sync): %v; want a partial run that deferred streams and failed none", quota, full, err)
	}
	if !errors.Is(err, extract.ErrQuotaExhausted) {
		t.Errorf("the run error does not wrap ErrQuotaExhausted: %v", err)
	}
	deferred := map[string]bool{}
	for _, d := range re.Deferred {
		deferred[d.Object] = true
		if s, reason := statusOf(t, got, res.RunID, d.Object); s != "deferred" || !strings.Contains(reason, "quota") {
			t.Errorf("%s recorded as %q (%s)", d.Object, s, reason)
		}
	}
	if q := c.Quota(); !q.Known || q.Limit != quota {
		t.Errorf("client's view of the quota %+v, want the announced limit %d", q, quota)
	}
	if at, ok := re.ResumeAt(); !ok || !at.Equal(c.Quota().Reset) {
		t.Errorf("ResumeAt %s, %v; want the announced reset %s", at, ok, c.Quota().Reset)
	}
	// A plan now says what the next run reads: the deferred streams only.
	// (It asks a fake of its own: this one's window is spent.)
	other := servicetest.NewServer(servicetest.WithUsers(limitedUsers), servicetest.WithSeed(limitedSeed))
	defer other.Close()
	plan, err := pipeline.Plan(ctx, client(t, other.URL, other.Service.AccessToken(), opts...), pipeline.PlanConfig{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if !plan.Continues || len(plan.Objects) != len(cfg.Only) {
		t.Errorf("plan: continues %v, %d streams; want it to continue the day over the %d streams", plan.Continues, len(plan.Objects), len(cfg.Only))
	}
	for _, o := range plan.Objects {
		if o.NotContinued == deferred[o.Object] || o.NotContinued && o.Requests != 0 || !o.NotContinued && o.Requests == 0 {
			t.Errorf("plan of %s: done today %v, %d requests; deferred %v", o.Object, o.NotContinued, o.Requests, deferred[o.Object])
		}
	}
	time.Sleep(time.Until(c.Quota().Reset) + 100*time.Millisecond)

	cfg.Only = nil // a run told nothing continues what the quota deferred today
	res2, err := pipeline.Sync(ctx, c, cfg)
	if err != nil {
		t.Fatalf("second run: %v", err)
	}
	for _, o := range res2.Objects {
		if !deferred[o.Object] {
			t.Errorf("the second run read %s, which the first committed; it should continue only the deferred %v", o.Object, deferred)
		}
	}
	if n := srv.Service.QuotaRefused(); n != 0 {
		t.Errorf("%d requests were answered 429 past the announced quota", n)
	}
	sameOutput(t, want, got)
}

// TestLimitedTokenWithAConfiguredReportStream: a licence that lapses must
// not fail the run when sepipe.yaml configures a report object (as the
// example does): the report objects are skipped, the collections commit
// (the configured stream was taken for an unknown object and nothing
// synced; found by review).
func TestLimitedTokenWithAConfiguredReportStream(t *testing.T) {
	t.Parallel()
	srv := servicetest.NewServer(servicetest.WithUsers(20), servicetest.WithSeed(3))
	defer srv.Close()
	out := t.TempDir()
	ctx := context.Background()
	streams := map[string]pipeline.StreamConfig{"userCourseProgress": ucpMerge}
	if _, err := pipeline.Sync(ctx, client(t, srv.URL, srv.Service.AccessToken()), pipeline.Config{Out: out, Streams: streams, Now: clock(day1)}); err != nil {
		t.Fatal(err)
	}
	_, err := pipeline.Sync(ctx, client(t, srv.URL, srv.Service.LimitedToken()), pipeline.Config{Out: out, Streams: streams, Now: clock(day1.Add(24 * time.Hour))})
	var re *pipeline.RunError
	if !errors.As(err, &re) || !re.Partial || len(re.Skipped) != 5 || len(re.Failed) != 0 {
		t.Fatalf("limited token with a configured stream: %v; want a partial run that skipped the 5 report objects", err)
	}
}
