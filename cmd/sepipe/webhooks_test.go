package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/extract/servicetest"
)

func TestWebhookCommands(t *testing.T) {
	fake := servicetest.NewServer(servicetest.WithUsers(5))
	defer fake.Close()
	t.Setenv("SEPIPE_API_TOKEN", fake.Service.APIToken())
	base := []string{"--base-url", fake.URL}
	wh := func(args ...string) (int, string, string) {
		t.Helper()
		return runCLI(t, append(append([]string{"webhooks"}, args...), base...)...)
	}

	code, out, errOut := wh("create", "--name", "lms", "--url", "https://hooks.example.com/in?subscription=lms",
		"--types", "COURSE_COMPLETED", "--header", "X-Api-Key=dest-secret-123")
	if code != exitOK {
		t.Fatalf("create: %d %s", code, errOut)
	}
	m := regexp.MustCompile(`signing secret: (\S+)`).FindStringSubmatch(out)
	if m == nil || !strings.Contains(out, "lms") {
		t.Fatalf("create printed no secret:\n%s", out)
	}
	for _, want := range []string{"not show it again", "SEPIPE_WEBHOOK_SECRET", "webhooks.secrets"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("create does not say %q:\n%s", want, errOut)
		}
	}
	if strings.Contains(out+errOut, "dest-secret-123") {
		t.Error("a header value was printed")
	}
	id := regexp.MustCompile(`\b[0-9A-HJKMNP-TV-Z]{26}\b`).FindString(out)
	if id == "" {
		t.Fatalf("no subscription id in:\n%s", out)
	}

	code, out, errOut = wh("create", "--name", "json-one", "--url", "https://hooks.example.com/2", "--method", "get",
		"--types", "content-viewed", "--format", "json")
	var created map[string]any
	if code != exitOK || json.Unmarshal([]byte(out), &created) != nil || created["signatureKey"] == "" || created["method"] != "GET" {
		t.Fatalf("create json: %d %s %s", code, out, errOut)
	}

	code, out, errOut = wh("list")
	if code != exitOK || !strings.Contains(out, "lms") || !strings.Contains(out, "json-one") || !strings.Contains(out, "REQUESTS") {
		t.Fatalf("list: %d\n%s%s", code, out, errOut)
	}
	if strings.Contains(out, m[1]) {
		t.Error("list printed the signing secret")
	}
	code, out, _ = wh("list", "--format", "json")
	if code != exitOK || strings.Count(out, "\n") != 2 || strings.Contains(out, "signatureKey") {
		t.Fatalf("list json: %d\n%s", code, out)
	}

	code, out, errOut = wh("update", id, "--types", "COURSE_COMPLETED,shared-space-created", "--format", "json")
	var upd struct {
		Name  string
		Types []string
		URL   string
	}
	if code != exitOK || json.Unmarshal([]byte(out), &upd) != nil || len(upd.Types) != 2 || upd.Name != "lms" || !strings.Contains(upd.URL, "subscription=lms") {
		t.Fatalf("update: %d %s %s", code, out, errOut)
	}
	code, out, _ = wh("get", id)
	if code != exitOK || !strings.Contains(out, "shared-space-created") {
		t.Fatalf("get: %d\n%s", code, out)
	}
	code, out, errOut = wh("logs", id)
	if code != exitOK || !strings.Contains(out, "OUTCOME") {
		t.Fatalf("logs: %d %s %s", code, out, errOut)
	}
	if code, _, errOut = wh("delete", id); code != exitOK {
		t.Fatalf("delete: %d %s", code, errOut)
	}
	if code, _, errOut = wh("get", id); code != exitFailed || !strings.Contains(errOut, "404") {
		t.Fatalf("get after delete: %d %s", code, errOut)
	}

	for _, tc := range []struct {
		args []string
		env  string
		msg  string
	}{
		{[]string{"webhooks", "list", "--base-url", fake.URL}, "", "SEPIPE_API_TOKEN is not set"},
		{[]string{"webhooks", "list"}, "t", "--base-url is required"},
		{[]string{"webhooks", "list", "--base-url", fake.URL, "--format", "xml"}, "t", `--format "xml"`},
		{[]string{"webhooks", "create", "--base-url", fake.URL, "--url", "ftp://x", "--types", "x"}, "t", "name is required"},
		{[]string{"webhooks", "create", "--base-url", fake.URL, "--name", "n", "--url", "https://x", "--types", "x", "--header", "novalue"}, "t", "NAME=VALUE"},
		{[]string{"listen", "--out", t.TempDir()}, "", "no signing secret"},
		{[]string{"listen", "--out", t.TempDir(), "--secret", "k3y-k3y-k3y", "--max-bytes-in-flight", "1048576"}, "", "--max-bytes-in-flight, --max-bytes-per-source: 1048576 bytes in flight: want at least twice the max body"},
		{[]string{"listen", "--out", t.TempDir(), "--secret", "k3y-k3y-k3y", "--max-bytes-per-source", "1000"}, "", "1000 bytes per source: want at least the max body"},
	} {
		t.Setenv("SEPIPE_API_TOKEN", tc.env)
		t.Setenv("SEPIPE_WEBHOOK_SECRET", "")
		if code, _, errOut := runCLI(t, tc.args...); code != exitUsage || !strings.Contains(errOut, tc.msg) {
			t.Errorf("%v: exit %d, want %d with %q:\n%s", tc.args, code, exitUsage, tc.msg, errOut)
		}
	}
	t.Setenv("SEPIPE_API_TOKEN", "wrong-token")
	if code, _, errOut := wh("list"); code != exitFailed || !strings.Contains(errOut, "developer API token") {
		t.Errorf("wrong token: %d %s", code, errOut)
	}
}

// TestWebhookCreateThenListenEndToEnd is the user's path: create a
// subscription pointing at 'sepipe listen', keep the secret in
// SEPIPE_WEBHOOK_SECRET, listen, let the tenant's clock run, stop with a
// signal, query the events.
func TestWebhookCreateThenListenEndToEnd(t *testing.T) {
	fake := servicetest.NewServer(servicetest.WithUsers(30), servicetest.WithDeliveryRetryDelays(100*time.Millisecond))
	defer fake.Close()
	t.Setenv("SEPIPE_API_TOKEN", fake.Service.APIToken())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // the port, for 'sepipe listen --addr'
	code, out, errOut := runCLI(t, "webhooks", "create", "--base-url", fake.URL, "--name", "cli",
		"--url", "http://"+addr+"/events?subscription=cli", "--types", "COURSE_COMPLETED")
	if code != exitOK {
		t.Fatalf("create: %s", errOut)
	}
	secret := regexp.MustCompile(`signing secret: (\S+)`).FindStringSubmatch(out)[1]
	// The secret is kept in the config, as a reference; the environment
	// holds a retired one.
	t.Setenv("SEPIPE_WEBHOOK_SECRET", "old-secret")
	t.Setenv("LMS_HOOK_SECRET", secret)
	dir := t.TempDir()
	conf := filepath.Join(t.TempDir(), "sepipe.yaml")
	yaml := fmt.Sprintf("webhooks:\n  listen: %q\n  secrets: [\"${LMS_HOOK_SECRET}\"]\noutput:\n  dir: %q\n", addr, dir)
	if err := os.WriteFile(conf, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var lout, lerr bytes.Buffer
	go func() {
		done <- run(ctx, []string{"listen", "--config", conf, "--batch-interval", "100ms"}, &lout, &lerr)
	}()
	for i := 0; ; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		if i == 100 {
			t.Fatalf("listen did not start: %s", lerr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	n := fake.Service.Advance(60 * 24 * time.Hour)
	wctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := fake.Service.WaitDeliveries(wctx); err != nil {
		t.Fatal(err)
	}
	stop() // what SIGTERM does in main
	if code := <-done; code != exitOK {
		t.Fatalf("listen exit %d:\n%s", code, lerr.String())
	}
	code, out, errOut = runCLI(t, "query", "--out", dir, "--format", "csv",
		"SELECT count(*) || '/' || count(*) FILTER (subscription = 'cli') AS n FROM events")
	if want := fmt.Sprintf("n\n%d/%d\n", n, n); code != exitOK || out != want || n == 0 {
		t.Fatalf("events after listen: %q (%s), want %q", out, errOut, want)
	}
}

// A subscription whose createdAt the service wrote in no ISO 8601 form
// (extract leaves it zero, the subscription kept) is listed with "-", not
// as created in the year 1.
func TestWebhookListPrintsAnUnreadTimeAsADash(t *testing.T) {
	var b strings.Builder
	printSubscriptions(&b, []extract.Subscription{{ID: "01A", Name: "odd"}, {ID: "01B", Name: "ok", CreatedAt: time.Date(2026, 3, 5, 9, 53, 27, 0, time.UTC)}})
	if out := b.String(); strings.Contains(out, "0001-01-01") || !strings.Contains(out, "2026-03-05T09:53:27Z") || !strings.Contains(out, " -\n") {
		t.Errorf("list:\n%s", out)
	}
}

// listen --addr defaulted to 127.0.0.1:8787, the dashboard's default, so
// the two without flags collided ("address already in use").
func TestListenAndDashboardDefaultAddrsDiffer(t *testing.T) {
	_, lh, _ := runCLI(t, "listen", "--help")
	_, dh, _ := runCLI(t, "dashboard", "--help")
	def := func(help string) string {
		for _, l := range strings.Split(help, "\n") {
			if strings.Contains(l, "--addr ") {
				if _, d, ok := strings.Cut(l, `(default "`); ok {
					return strings.TrimSuffix(d, `")`)
				}
			}
		}
		return ""
	}
	if l, d := def(lh), def(dh); l == "" || l == d {
		t.Errorf("listen --addr defaults to %q, dashboard --addr to %q", l, d)
	}
}

// A bad --addr is bad usage naming the flag (exit 2), as dashboard and
// simulate say it; listen exited 1 with Go's net error.
func TestListenBadAddrIsUsage(t *testing.T) {
	t.Setenv("SEPIPE_WEBHOOK_SECRET", "abcdefghijklmnop")
	code, _, errOut := runCLI(t, "listen", "--out", t.TempDir(), "--addr", "bad")
	if code != exitUsage || !strings.Contains(errOut, "--addr bad") {
		t.Errorf("listen --addr bad: exit %d, want %d naming --addr\n%s", code, exitUsage, errOut)
	}
}

// webhooks and dbt-sources without --base-url required it even beside a
// ./sepipe.yaml naming service.tenant_url; they read it as sync does.
func TestWebhooksAndDBTSourcesReadTheConfigsTenantURL(t *testing.T) {
	srv := servicetest.NewServer(servicetest.WithUsers(5))
	defer srv.Close()
	setEnv(t, srv)
	dir := t.TempDir()
	writeConfig(t, dir, srv.URL, filepath.Join(dir, "data"), "")
	t.Chdir(dir)
	if code, out, errOut := runCLI(t, "webhooks", "list"); code != exitOK {
		t.Errorf("webhooks list beside sepipe.yaml: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := runCLI(t, "dbt-sources", "--out-file", "-"); code != exitOK || !strings.Contains(out, "userCourseProgress") {
		t.Errorf("dbt-sources beside sepipe.yaml: exit %d\n%s%s", code, firstLine(out), errOut)
	}
}
