package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sepipe/sepipe/extract/servicetest"
	"github.com/sepipe/sepipe/internal/faults"
	"github.com/sepipe/sepipe/internal/lakeservers"
	"github.com/sepipe/sepipe/lakehouse"
)

// icebergSetup serves a fake tenant of 20 users and writes the user's
// config with an Iceberg lake (SQLite catalog, local warehouse) in
// lakeDir beside the output folder out.
func icebergSetup(t *testing.T) (url, out, lakeDir, cfg string) {
	t.Helper()
	srv := servicetest.NewServer(servicetest.WithUsers(20))
	t.Cleanup(srv.Close)
	setEnv(t, srv)
	dir := t.TempDir()
	out, lakeDir = filepath.Join(dir, "out"), filepath.Join(dir, "lake")
	cfg = writeConfig(t, dir, srv.URL, out, fmt.Sprintf("  lake:\n    iceberg:\n      catalog: {uri: %s}\n      warehouse: file://%s\n",
		filepath.Join(lakeDir, "catalog.db"), filepath.Join(lakeDir, "warehouse")))
	return srv.URL, out, lakeDir, cfg
}

// TestLakeExpire: `sepipe sync` with output.lake.iceberg commits to the
// Iceberg lake; `sepipe lake expire --older-than 90d` leaves a day-old lake
// alone, and a cutoff younger than the snapshots keeps only each table's
// current one, the table still reading back the warehouse's rows.
func TestLakeExpire(t *testing.T) {
	url, out, lakeDir, cfg := icebergSetup(t)
	mustRun(t, "sync", "--config", cfg, "--quiet")
	mustRun(t, "sync", "--config", cfg, "--quiet") // a same-day rerun: a second snapshot per table
	if s := mustRun(t, "check", "--config", cfg); !regexp.MustCompile(`(?m)^iceberg\s+sql catalog sepipe\s+ok\s+([5-9]|\d\d) tables in namespace sepipe\s*$`).MatchString(s) {
		t.Errorf("check does not report the Iceberg catalog's tables:\n%s", s)
	}

	row := regexp.MustCompile(`(?m)^sepipe\.(\S+)\s+(\d+)\s+(\d+)\s+(\d+)\s*$`)
	expire := func(age string) map[string][3]string {
		t.Helper()
		s := mustRun(t, "lake", "expire", "--config", cfg, "--older-than", age)
		got := map[string][3]string{}
		for _, m := range row.FindAllStringSubmatch(s, -1) {
			if m[2] != "0" { // an empty stream's table has no snapshot
				got[m[1]] = [3]string{m[2], m[3], m[4]}
			}
		}
		if len(got) < 5 {
			t.Fatalf("lake expire --older-than %s:\n%s", age, s)
		}
		return got
	}
	for tb, r := range expire("90d") {
		if r[0] != "2" || r[1] != "2" || r[2] != "0" {
			t.Errorf("--older-than 90d: table %s: snapshots %s -> %s, orphans %s; want 2 -> 2, 0", tb, r[0], r[1], r[2])
		}
	}
	time.Sleep(1100 * time.Millisecond)
	for tb, r := range expire("1s") {
		if r[0] != "2" || r[1] != "1" {
			t.Errorf("--older-than 1s: table %s: snapshots %s -> %s; want 2 -> 1", tb, r[0], r[1])
		}
	}
	lh, err := lakehouse.Open(context.Background(), lakehouse.Config{
		Catalog:   lakehouse.CatalogConfig{URI: filepath.Join(lakeDir, "catalog.db")},
		Warehouse: "file://" + filepath.Join(lakeDir, "warehouse"),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer lh.Close()
	tbl, err := lh.LoadTable(context.Background(), "", "userCourseProgress")
	if err != nil {
		t.Fatal(err)
	}
	at, err := tbl.Scan().ToArrowTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer at.Release()
	if want := queryOne(t, out, "SELECT count(*) FROM userCourseProgress"); fmt.Sprint(at.NumRows()) != want {
		t.Errorf("after expiring, the lake's userCourseProgress has %d rows, the warehouse %s", at.NumRows(), want)
	}

	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"lake", "expire", "--config", cfg, "--older-than", "soon"}, `--older-than: bad duration "soon"`},
		{[]string{"lake", "expire", "--config", writeConfig(t, t.TempDir(), url, out, ""), "--older-than", "90d"}, "no output.lake.iceberg block"},
	} {
		code, _, errOut := runCLI(t, tc.args...)
		if code != exitUsage || !strings.Contains(errOut, tc.msg) {
			t.Errorf("sepipe %s: exit %d, stderr %q; want %d and %q", strings.Join(tc.args, " "), code, errOut, exitUsage, tc.msg)
		}
	}
}

// TestSyncLakePendingExitsPartial: a sync whose Iceberg commit fails after
// the warehouse committed exits 3 (partial) with a hint, not 1 (nothing
// committed); the next sync settles it and exits 0.
func TestSyncLakePendingExitsPartial(t *testing.T) {
	_, _, lakeDir, cfg := icebergSetup(t)
	faults.Set(func(point string) {
		if point == string(faults.Committed) { // the day's files of course vanish before the Iceberg commit
			os.RemoveAll(filepath.Join(lakeDir, "warehouse", "sepipe.db", "course", "data"))
		}
	})
	code, _, errOut := runCLI(t, "sync", "--config", cfg, "--quiet")
	faults.Set(nil)
	if code != exitPartial || !strings.Contains(errOut, "Iceberg commit is pending") || !strings.Contains(errOut, "hint: the warehouse and the local lake have the run") {
		t.Fatalf("exit %d, stderr:\n%s\nwant %d, the pending Iceberg commit and the hint", code, errOut, exitPartial)
	}
	mustRun(t, "sync", "--config", cfg, "--quiet")
}

// TestLostIcebergFileSaysSoAndHowOut: a data file of the merge stream's
// Iceberg table is lost (issue 40). The sync that meets the loss exits 3,
// its summary showing the stream LAKE-FAILED (it showed ok), the message
// and hint naming the file and the full refresh that rebuilds the table
// (it said "the next run finishes it"); the next sync exits 3 with that
// stream alone FAILED, the others ok (every later sync failed whole); the
// full refresh exits 0, and so does the night after.
func TestLostIcebergFileSaysSoAndHowOut(t *testing.T) {
	_, _, lakeDir, cfg := icebergSetup(t)
	mustRun(t, "sync", "--config", cfg, "--quiet")
	files, _ := filepath.Glob(filepath.Join(lakeDir, "warehouse", "sepipe.db", "userCourseProgress", "data", "*", "*.parquet"))
	if len(files) == 0 {
		t.Fatal("no data file in userCourseProgress's table")
	}
	for _, f := range files {
		if err := os.Rename(f, filepath.Join(t.TempDir(), filepath.Base(f))); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := runCLI(t, "sync", "--config", cfg)
	if code != exitPartial || summaryCell(t, out, "userCourseProgress", "STATUS") != "LAKE-FAILED" || summaryCell(t, out, "course", "STATUS") != "ok" ||
		!strings.Contains(errOut, "sepipe sync --full-refresh userCourseProgress") || !strings.Contains(errOut, filepath.Base(files[0])) ||
		strings.Contains(errOut, "next run finishes") || !strings.Contains(errOut, "hint: a data file of an Iceberg table is gone") {
		t.Fatalf("the sync that met the loss: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "sync", "--config", cfg)
	if code != exitPartial || summaryCell(t, out, "userCourseProgress", "STATUS") != "FAILED" || summaryCell(t, out, "course", "STATUS") != "ok" ||
		!strings.Contains(errOut, "sepipe sync --full-refresh userCourseProgress") {
		t.Fatalf("the sync after: exit %d\n%s\n%s", code, out, errOut)
	}
	mustRun(t, "sync", "--config", cfg, "--full-refresh", "userCourseProgress", "--quiet")
	mustRun(t, "sync", "--config", cfg, "--quiet")
}

// TestUnwritableLocalWarehouseSaysFolder: a file:// Iceberg warehouse
// that cannot be written was reported with a message about buckets,
// s3.endpoint and AWS credentials, and a hint blaming --out (issue 40).
func TestUnwritableLocalWarehouseSaysFolder(t *testing.T) {
	url, out, lakeDir, _ := icebergSetup(t)
	// A file where the warehouse's folder would go: no one, root
	// included, can make the folder.
	if err := os.MkdirAll(lakeDir, 0o755); err != nil {
		t.Fatal(err)
	}
	blocker := filepath.Join(lakeDir, "a-file")
	if err := os.WriteFile(blocker, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	wh := filepath.Join(blocker, "warehouse")
	cfg := writeConfig(t, t.TempDir(), url, out, fmt.Sprintf("  lake:\n    iceberg:\n      catalog: {uri: %s}\n      warehouse: file://%s\n",
		filepath.Join(lakeDir, "catalog.db"), wh))
	code, _, errOut := runCLI(t, "sync", "--config", cfg, "--quiet")
	if code != exitFailed || !strings.Contains(errOut, "iceberg warehouse file://"+wh) || !strings.Contains(errOut, "must be a folder sepipe can create and write") ||
		strings.Contains(errOut, "bucket") || strings.Contains(errOut, "--out") || !strings.Contains(errOut, "hint: the Iceberg warehouse (output.lake.iceberg.warehouse)") {
		t.Fatalf("exit %d:\n%s", code, errOut)
	}
}

// TestCheckReportsAnUnreachableCatalog: a catalog that cannot be reached
// fails sepipe check (exit 1) with the reason, on a line of its own.
func TestCheckReportsAnUnreachableCatalog(t *testing.T) {
	srv := servicetest.NewServer(servicetest.WithUsers(5))
	defer srv.Close()
	setEnv(t, srv)
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	cfg := writeConfig(t, dir, srv.URL, filepath.Join(dir, "out"), fmt.Sprintf("  lake:\n    iceberg:\n      catalog: {driver: postgres, uri: \"postgres://sepipe@%s/lake?sslmode=disable&connect_timeout=2\"}\n      warehouse: file://%s\n",
		addr, filepath.Join(dir, "warehouse")))
	code, stdout, stderr := runCLI(t, "check", "--config", cfg)
	if code != exitFailed || !regexp.MustCompile(`(?m)^iceberg\s+sql catalog sepipe\s+failed\s+.*connect`).MatchString(stdout) {
		t.Errorf("check with an unreachable catalog: exit %d\n%s\n%s", code, stdout, stderr)
	}
}

// TestCheckReportsAnUnwritableWarehouse: with the catalog reachable and
// the S3 warehouse not (its bucket missing, the secret key wrong, nothing
// at the endpoint), sepipe check fails its iceberg line naming the
// warehouse and the reason. It said ok (it only listed the catalog's
// tables), and the sync then failed every stream.
func TestCheckReportsAnUnwritableWarehouse(t *testing.T) {
	s3 := lakeservers.StartS3(t)
	s3.CreateBucket(t, "lake")
	srv := servicetest.NewServer(servicetest.WithUsers(5))
	defer srv.Close()
	setEnv(t, srv)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nothing := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now
	for _, tc := range []struct{ name, bucket, endpoint, secret, reason string }{
		{"no bucket", "nolake", s3.Endpoint, "", "NoSuchBucket"},
		{"wrong secret", "lake", s3.Endpoint, "wrong", "SignatureDoesNotMatch"},
		{"no server", "lake", nothing, "", "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.secret != "" {
				t.Setenv("AWS_SECRET_ACCESS_KEY", tc.secret)
			}
			t.Setenv("AWS_MAX_ATTEMPTS", "1")
			dir := t.TempDir()
			cfg := writeConfig(t, dir, srv.URL, filepath.Join(dir, "out"), fmt.Sprintf("  lake:\n    iceberg:\n      catalog: {uri: %s}\n      warehouse: s3://%s/sepipe\n      s3: {endpoint: %s, region: %s}\n",
				filepath.Join(dir, "catalog.db"), tc.bucket, tc.endpoint, s3.Region))
			code, stdout, stderr := runCLI(t, "check", "--config", cfg)
			want := regexp.MustCompile(`(?m)^iceberg\s+sql catalog sepipe\s+failed\s+iceberg warehouse s3://` + tc.bucket + `/sepipe: .*` + tc.reason)
			if code != exitFailed || !want.MatchString(stdout) {
				t.Errorf("check: exit %d, want %d and the iceberg line failed naming the warehouse and %s\n%s\n%s", code, exitFailed, tc.reason, stdout, stderr)
			}
		})
	}
	// The bucket as configured: ok, and the probe object is gone.
	dir := t.TempDir()
	cfg := writeConfig(t, dir, srv.URL, filepath.Join(dir, "out"), fmt.Sprintf("  lake:\n    iceberg:\n      catalog: {uri: %s}\n      warehouse: s3://lake/sepipe\n      s3: {endpoint: %s, region: %s}\n",
		filepath.Join(dir, "catalog.db"), s3.Endpoint, s3.Region))
	if s := mustRun(t, "check", "--config", cfg); !regexp.MustCompile(`(?m)^iceberg\s+sql catalog sepipe\s+ok\s`).MatchString(s) {
		t.Errorf("check with a writable warehouse:\n%s", s)
	}
	if objs := s3.Objects(t, "lake", ""); len(objs) != 0 {
		t.Errorf("check left objects in the bucket: %v", objs)
	}
}
