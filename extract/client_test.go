package extract

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sepipe/sepipe/service"
)

func TestNew(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"", "acme.example.com", "ftp://acme.example.com", "https://", "://x"} {
		if _, err := New(bad); err == nil {
			t.Errorf("New(%q): no error", bad)
		}
	}
	for name, o := range map[string]Option{
		"concurrency": WithConcurrency(0),
		"page size":   WithPageSize(-1),
		"retry":       WithRetry(0, time.Second),
		"http client": WithHTTPClient(nil),
	} {
		if _, err := New("https://acme.example.com", o); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	c, err := New("https://acme.example.com/tenant/?sid=1#x")
	if err != nil {
		t.Fatal(err)
	}
	u, err := c.endpoint("objects", "a/b", "describe")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := u.String(), "https://acme.example.com/tenant/api/learn/reporting/v3/json/objects/a%2Fb/describe"; got != want {
		t.Fatalf("endpoint = %s, want %s", got, want)
	}
}

func TestRequestHeaders(t *testing.T) {
	t.Parallel()
	var got http.Header
	var mu sync.Mutex
	c, _ := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = r.Header.Clone()
		mu.Unlock()
		if r.URL.Path != reportingPath+"/objects/curriculum/describe" || r.URL.RawQuery != "" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(describeOK))
	}))
	if _, err := c.Describe(context.Background(), "curriculum"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if got.Get("Authorization") != "Bearer "+testToken || got.Get("Accept") != "application/json" || !strings.HasPrefix(got.Get("User-Agent"), "sepipe/") {
		t.Fatalf("headers %v", got)
	}
}

func TestObjectsAndDescribe(t *testing.T) {
	t.Parallel()
	var srvURL string
	c, srv := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case reportingPath + "/objects":
			fmt.Fprintf(w, `{"objects":[
				{"id":"curriculum","displayName":"Curricula","urls":{"describe":"/api/learn/reporting/v3/json/objects/curriculum/describe","object":"/api/learn/reporting/v3/json/objects/curriculum"}},
				{"id":"course","displayName":"Courses","urls":{"describe":"%[1]s/api/learn/reporting/v3/json/objects/course/describe","object":"https://elsewhere.example.com/objects/course"}},
				{"id":"path","displayName":"Paths","urls":{"describe":"objects/path/describe","object":"objects/path"}},
				{"id":"user progress","displayName":"Progress"}
			]}`, srvURL)
		case reportingPath + "/objects/curriculum/describe":
			_, _ = w.Write([]byte(`{"fields":[
				{"id":"curriculumTitle","displayName":"Curriculum Title","type":"string"},
				{"id":"courseCount","displayName":"Courses","type":"int"},
				{"id":"startPercentage","displayName":"Started","type":"percent"},
				{"id":"status","displayName":"Status","type":"picklist","options":["active","archived"]},
				{"id":"odd","displayName":"Odd","type":"boolean"}
			]}`))
		default:
			http.NotFound(w, r)
		}
	}))
	srvURL = srv.URL
	objs, err := c.Objects(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rep := srv.URL + reportingPath
	want := []Object{
		{"curriculum", "Curricula", rep + "/objects/curriculum/describe", rep + "/objects/curriculum"},
		{"course", "Courses", rep + "/objects/course/describe", "https://elsewhere.example.com/objects/course"},
		{"path", "Paths", rep + "/objects/path/describe", rep + "/objects/path"},
		{"user progress", "Progress", rep + "/objects/user%20progress/describe", rep + "/objects/user%20progress"},
	}
	if fmt.Sprint(objs) != fmt.Sprint(want) {
		t.Fatalf("objects\n got %v\nwant %v", objs, want)
	}
	fields, err := c.Describe(context.Background(), "curriculum")
	if err != nil {
		t.Fatal(err)
	}
	if len(fields) != 5 || fields[3].Type != "picklist" || fmt.Sprint(fields[3].Options) != "[active archived]" || fields[4].Type != "boolean" || fields[0].DisplayName != "Curriculum Title" {
		t.Fatalf("fields %+v", fields)
	}
	if _, err := c.Describe(context.Background(), "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %v", err)
	}
	if _, err := c.Describe(context.Background(), ""); err == nil {
		t.Fatal("empty id accepted")
	}
}

func TestWrongShapeNotRetried(t *testing.T) {
	t.Parallel()
	s := &script{steps: []func(http.ResponseWriter, *http.Request){body(200, `{"objects":"none"}`), body(200, `{"objects":[]}`)}}
	c, _ := newTestClient(t, s)
	if _, err := c.Objects(context.Background()); err == nil || s.n.Load() != 1 {
		t.Fatalf("err = %v after %d requests", err, s.n.Load())
	}
	s2 := &script{steps: []func(http.ResponseWriter, *http.Request){body(200, `{}`)}}
	c2, _ := newTestClient(t, s2)
	if _, err := c2.Describe(context.Background(), "x"); err == nil {
		t.Fatal("missing fields list accepted")
	}
}

func TestRedactURL(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"https://h.example.com/service/webservices_mobile/token.ashx?sid=1&sky=abc&uid=7&login_dir=acme&Token=t&TICKET=k": "https://h.example.com/service/webservices_mobile/token.ashx?sid=REDACTED&sky=REDACTED&uid=REDACTED&login_dir=acme&Token=REDACTED&TICKET=REDACTED",
		"https://h/x?password=p&access_token=a&api_key=k&parameters=e30%3D":                                               "https://h/x?password=REDACTED&access_token=REDACTED&api_key=REDACTED&parameters=e30%3D",
		"https://user:pw@h/x#access_token=abc":                                                                            "https://user:REDACTED@h/x",
		"https://h/x?acc%65ss_token=a&b=1":                                                                                "https://h/x?access_token=REDACTED&b=1",
		"https://h/x":                                                                                                     "https://h/x",
	}
	for in, want := range cases {
		u, err := url.Parse(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := service.RedactURL(u); got != want {
			t.Errorf("service.RedactURL(%s)\n got %s\nwant %s", in, got, want)
		}
		if u.String() == want && in != want {
			t.Errorf("service.RedactURL changed its argument")
		}
	}
	if service.RedactURL(nil) != "" {
		t.Error("nil URL")
	}
}

// The token never shows in errors, logs or printed clients, whatever the
// failure, even when the service echoes it back.
func TestTokenNeverLeaks(t *testing.T) {
	t.Parallel()
	echo := func(code int) func(http.ResponseWriter, *http.Request) {
		return func(w http.ResponseWriter, r *http.Request) {
			body(code, `{"response":{"code":4001,"name":"AuthError","message":"bad header `+r.Header.Get("Authorization")+`"}}`)(w, r)
		}
	}
	problem := func(w http.ResponseWriter, r *http.Request) {
		body(403, `{"type":"/errors/forbidden","title":"Forbidden `+testToken+`","detail":"`+r.Header.Get("Authorization")+`","status":403}`)(w, r)
	}
	raw := func(w http.ResponseWriter, r *http.Request) {
		body(401, "token="+testToken)(w, r)
	}
	var logs logBuffer
	var errs []string
	for _, step := range []func(http.ResponseWriter, *http.Request){echo(401), echo(400), echo(500), problem, raw, dropMidBody, status(429)} {
		s := &script{steps: []func(http.ResponseWriter, *http.Request){step}}
		c, _ := newTestClient(t, s, WithLogger(debugLogger(&logs)), WithRetry(2, time.Minute))
		_, err := c.Describe(context.Background(), "course")
		if err == nil {
			t.Fatal("no error")
		}
		_, err2 := c.ReadObject(context.Background(), "course", Query{}, newCollector().fn)
		errs = append(errs, err.Error(), fmt.Sprintf("%+v", err), fmt.Sprint(err2),
			fmt.Sprintf("%v %+v %#v", c, c, c))
	}
	if !strings.Contains(logs.String(), "reporting request") || !strings.Contains(logs.String(), "retrying") {
		t.Fatalf("expected debug and retry logs, got %q", logs.String())
	}
	for _, s := range append(errs, logs.String()) {
		if strings.Contains(s, testToken) {
			t.Fatalf("token leaked: %s", s)
		}
	}
	if !strings.Contains(strings.Join(errs, "\n"), "reporting access token") {
		t.Fatal("401/403 errors do not name the credential")
	}
}

// All requests of one client, of every kind, share one limiter: with a
// burst of 3 and no refill in the test's lifetime, exactly 3 requests reach
// the server however many calls run at once.
func TestRateLimiterShared(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	f := &fakeReport{rows: 1000}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		f.ServeHTTP(w, r)
	})
	c, _ := newTestClient(t, h, WithRateLimit(0.0001, 3), WithPageSize(10), WithConcurrency(4))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			switch i % 3 {
			case 0:
				_, err = c.Objects(ctx)
			case 1:
				_, err = c.Describe(ctx, "course")
			default:
				_, err = c.ReadObject(ctx, "course", Query{}, newCollector().fn)
			}
			errs <- err
		}()
	}
	for n.Load() < 3 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	wg.Wait()
	close(errs)
	if got := n.Load(); got != 3 {
		t.Fatalf("%d requests reached the server, want 3", got)
	}
	failed := 0
	for err := range errs {
		if err != nil {
			failed++
			if !errors.Is(err, context.Canceled) {
				t.Errorf("err = %v, want context.Canceled", err)
			}
		}
	}
	if failed < 5 {
		t.Fatalf("%d calls failed, want at least 5 of 8 held by the limiter", failed)
	}
}

func TestDebugLog(t *testing.T) {
	t.Parallel()
	var logs logBuffer
	f := &fakeReport{rows: 5}
	c, _ := newTestClient(t, f, WithLogger(debugLogger(&logs)), WithPageSize(10))
	if _, err := c.ReadObject(context.Background(), "course", Query{}, newCollector().fn); err != nil {
		t.Fatal(err)
	}
	debugLogger(&logs).Info("client configured", "client", c)
	out := logs.String()
	for _, want := range []string{"method=GET", `url="http://127.0.0.1`, "/objects/course?parameters=", "status=200", "attempt=1", "duration=",
		`parameters="{\"page\":1,\"resultsPerPage\":10}"`, "client.token=REDACTED"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, testToken) {
		t.Fatal("token in log")
	}
}

// An id of a single theme or subscription becomes a path segment: "." or
// ".." would address another level (DELETE .../subscriptions/.. is a
// DELETE of the collection once a proxy resolves it), so the calls refuse
// them, naming the id, before any request.
func TestSingleResourceCallsRefuseDotIDs(t *testing.T) {
	t.Parallel()
	var requests atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.NotFound(w, r)
	})
	c, _ := newTestClient(t, h, WithAPIToken(tAPIToken))
	ctx := context.Background()
	req := SubscriptionRequest{Name: "n", URL: "https://d/x", Method: "POST", Types: []string{"COURSE_COMPLETED"}}
	for _, id := range []string{".", ".."} {
		_, err1 := c.GetTheme(ctx, id)
		_, err2 := c.GetSubscription(ctx, id)
		_, err3 := c.UpdateSubscription(ctx, id, req)
		err4 := c.DeleteSubscription(ctx, id)
		for i, err := range []error{err1, err2, err3, err4} {
			if err == nil || !strings.Contains(err.Error(), `bad path segment "`+id+`"`) {
				t.Errorf("id %q, call %d: err = %v, want one naming the id", id, i+1, err)
			}
		}
	}
	if n := requests.Load(); n != 0 {
		t.Fatalf("%d requests sent for refused ids", n)
	}
}
