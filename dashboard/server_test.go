package dashboard

import (
	"database/sql"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testWarehouse writes a small published warehouse (a "user" table with a
// team and a region) into a new output folder and returns the folder.
func testWarehouse(t *testing.T) string {
	t.Helper()
	out := t.TempDir()
	db, err := sql.Open("duckdb", filepath.Join(out, "warehouse.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE "user" AS SELECT 'u1' AS userId, 'Secret Team' AS team, 'EU' AS region`); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

func writePanel(t *testing.T, dir, file, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, file), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// get serves one GET of path with the Host header host.
func get(h http.Handler, host, path string) *httptest.ResponseRecorder {
	req := httptest.NewRequest("GET", "http://127.0.0.1"+path, nil)
	req.Host = host
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestDashboardRefusesAForeignHost pins the defence against DNS
// rebinding: the dashboard listens without a login, and a page on another
// site that rebinds its own name to 127.0.0.1 sends that name as Host. A
// request whose Host is not localhost, an IP address, the listen
// address's host or an allowed host is answered 421 with the reason,
// never the page or a panel (found by review); the dashboard's own names
// are answered at any port.
func TestDashboardRefusesAForeignHost(t *testing.T) {
	h := Handler(Config{Out: testWarehouse(t), Addr: "dash.internal:8787", AllowedHosts: []string{"stats.example.com"}})
	for _, host := range []string{"attacker.example:8787", "attacker.example", "localhost.attacker.example", "127.0.0.1.nip.io:8787",
		"dash.internal.attacker.example", "example.com", ""} {
		for _, path := range []string{"/api/panels", "/", "/app.js"} {
			rec := get(h, host, path)
			if rec.Code != http.StatusMisdirectedRequest {
				t.Errorf("GET %s with Host %q: %d, want 421", path, host, rec.Code)
			}
			if b := rec.Body.String(); strings.Contains(b, "Secret Team") || strings.Contains(b, "<html") || !strings.Contains(b, "allowed-hosts") {
				t.Errorf("GET %s with Host %q answered:\n%.300s", path, host, b)
			}
		}
	}
	for _, host := range []string{"localhost", "localhost:8787", "LOCALHOST.:8787", "127.0.0.1", "127.0.0.1:8787", "[::1]:8787", "[::1]",
		"192.0.2.7:8787", "dash.internal:8787", "Dash.Internal", "stats.example.com", "stats.example.com:443"} {
		rec := get(h, host, "/api/panels")
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "Secret Team") {
			t.Errorf("GET /api/panels with Host %q: %d %.300s", host, rec.Code, rec.Body)
		}
	}
}

// TestParseAllowedHosts pins what --allowed-hosts (dashboard.allowed_hosts)
// takes: host names and addresses without a port, comma-separated; a URL,
// a port, a pattern or a name with other characters is an error naming the
// entry.
func TestParseAllowedHosts(t *testing.T) {
	got, err := ParseAllowedHosts(" Dash.Example.COM., 10.0.0.5 ,[::1],,intranet")
	if err != nil {
		t.Fatal(err)
	}
	if want := "dash.example.com 10.0.0.5 ::1 intranet"; strings.Join(got, " ") != want {
		t.Errorf("got %q, want %q", got, want)
	}
	for _, bad := range []string{"https://dash.example.com", "dash.example.com:8787", "*.example.com", "dash example", "dash/x", "a..b", "-"} {
		if _, err := ParseAllowedHosts("ok.example," + bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("%q: %v, want an error naming it", bad, err)
		}
	}
}
