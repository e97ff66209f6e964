package main

import (
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sepipe/sepipe/extract/servicetest"
)

const tenantsDoc = `tenants:
  acme:
    service:
      tenant_url: https://acme.example.com
    credentials:
      access_token: ${SEPIPE_TEST_ACME_TOKEN}
  globex:
    service:
      tenant_url: https://globex.example.com
      oauth:
        token_url: globex-token
output:
  dir: /srv/sepipe
`

// TestUseTenant: a tenant's blocks replace the top level's, its folder is
// its own, and every fault names the tenant's key at its line.
func TestUseTenant(t *testing.T) {
	t.Setenv("SEPIPE_TEST_ACME_TOKEN", "acme-token-123")
	t.Setenv("SEPIPE_ACCESS_TOKEN", "default-token-123")
	load := func(t *testing.T, doc string) *Config {
		t.Helper()
		c, err := parseConfig("c.yaml", []byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		c.SetDefaults()
		return c
	}

	c := load(t, tenantsDoc)
	if err := c.UseTenant("acme"); err != nil {
		t.Fatal(err)
	}
	if c.Service.TenantURL != "https://acme.example.com" || c.Credentials.AccessToken.Value.Reveal() != "acme-token-123" {
		t.Errorf("acme: url %q, token %s", c.Service.TenantURL, c.Credentials.AccessToken)
	}
	if c.Output.Dir != filepath.Join("/srv/sepipe", "acme") || c.tenant != "acme" {
		t.Errorf("acme's folder: %q", c.Output.Dir)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("acme: %v", err)
	}

	// A credential the tenant leaves out is the usual variable's.
	c = load(t, tenantsDoc)
	if err := c.UseTenant("globex"); err != nil {
		t.Fatal(err)
	}
	if c.Credentials.AccessToken.Ref != "${SEPIPE_ACCESS_TOKEN}" {
		t.Errorf("globex's access token: %s", c.Credentials.AccessToken)
	}
	err := c.Validate()
	if want := `c.yaml:11: tenants.globex.service.oauth.token_url: "globex-token" is not an absolute http or https URL`; err == nil || err.Error() != want {
		t.Errorf("globex: %v, want %q", err, want)
	}

	for _, tc := range []struct{ name, doc, tenant, want string }{
		{"none chosen", tenantsDoc, "", "the config lists tenants (acme, globex): choose one with --tenant"},
		{"unknown", tenantsDoc, "initech", `--tenant "initech": the config's tenants are acme, globex`},
		{"no tenants", "output:\n  dir: /x\n", "acme", "--tenant acme: the config lists no tenants"},
		{"top-level service too", "service:\n  tenant_url: https://x.example.com\n" + tenantsDoc, "acme",
			"c.yaml:1: service: with tenants, each tenant has its own service (tenants.NAME.service)"},
		{"a name that is no folder", "tenants:\n  ../up:\n    service: {tenant_url: https://x.example.com}\n", "../up",
			`c.yaml:2: tenants.../up: a tenant's name is lower-case letters, digits, - and _`},
		{"unknown key in a tenant", "tenants:\n  acme:\n    output: {dir: x}\n", "acme",
			`c.yaml:3: tenants.acme.output: unknown key "output" (want service, credentials, legacy)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseConfig("c.yaml", []byte(tc.doc))
			if err == nil {
				c.SetDefaults()
				err = c.UseTenant(tc.tenant)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestTwoTenantsSyncAtOnce: one config, two tenants (two fakes with
// different data and tokens), synced at the same time; each tenant's
// warehouse holds its own data and nothing of the other's.
func TestTwoTenantsSyncAtOnce(t *testing.T) {
	base := t.TempDir()
	users := map[string]int{"acme": 12, "globex": 21}
	var yaml strings.Builder
	yaml.WriteString("tenants:\n")
	for _, name := range []string{"acme", "globex"} {
		svc := servicetest.New(servicetest.WithUsers(users[name]))
		srv := httptest.NewServer(svc)
		t.Cleanup(srv.Close)
		env := "SEPIPE_TEST_" + strings.ToUpper(name) + "_TOKEN"
		t.Setenv(env, svc.AccessToken())
		fmt.Fprintf(&yaml, "  %s:\n    service: {tenant_url: %s}\n    credentials: {access_token: \"${%s}\"}\n", name, srv.URL, env)
	}
	fmt.Fprintf(&yaml, "include: [user]\nrequests: {rate: 1000}\noutput: {dir: %s}\n", filepath.Join(base, "data"))
	cfg := filepath.Join(base, "sepipe.yaml")
	if err := os.WriteFile(cfg, []byte(yaml.String()), 0o644); err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	errs := make(chan string, 2)
	for _, name := range []string{"acme", "globex"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, _, errOut := runCLI(t, "sync", "--config", cfg, "--tenant", name, "--log-level", "warn")
			if code != exitOK {
				errs <- fmt.Sprintf("sync --tenant %s: exit %d\n%s", name, code, errOut)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	for name, n := range users {
		out := filepath.Join(base, "data", name)
		if got := queryOne(t, out, `SELECT count(*) FROM "user"`); got != fmt.Sprint(n) {
			t.Errorf("%s's warehouse holds %s users, want %d", name, got, n)
		}
	}
	code, _, errOut := runCLI(t, "sync", "--config", cfg)
	if code != exitUsage || !strings.Contains(errOut, "choose one with --tenant") {
		t.Errorf("sync without --tenant: exit %d, %s", code, errOut)
	}
}

// TestLakeExpireEveryTenant: `lake expire` without --tenant expires every
// tenant's namespace: one whose tenant has not synced yet has no tables
// (and fails nothing), and the tenants block is checked as for a sync.
func TestLakeExpireEveryTenant(t *testing.T) {
	base := t.TempDir()
	svc := servicetest.New(servicetest.WithUsers(10))
	srv := httptest.NewServer(svc)
	t.Cleanup(srv.Close)
	t.Setenv("SEPIPE_TEST_ACME_TOKEN", svc.AccessToken())
	lake := filepath.Join(base, "lake")
	write := func(second string) string {
		t.Helper()
		doc := fmt.Sprintf(`tenants:
  acme:
    service: {tenant_url: %s}
    credentials: {access_token: "${SEPIPE_TEST_ACME_TOKEN}"}
  %s:
    service: {tenant_url: %s}
    credentials: {access_token: "${SEPIPE_TEST_ACME_TOKEN}"}
include: [user]
requests: {rate: 1000}
output:
  dir: %s
  lake:
    iceberg:
      catalog: {uri: %s}
      warehouse: file://%s
`, srv.URL, second, srv.URL, filepath.Join(base, "data"), filepath.Join(lake, "catalog.db"), filepath.Join(lake, "warehouse"))
		cfg := filepath.Join(base, "sepipe.yaml")
		if err := os.WriteFile(cfg, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	cfg := write("globex")
	mustRun(t, "sync", "--config", cfg, "--tenant", "acme", "--quiet")
	out := mustRun(t, "lake", "expire", "--config", cfg, "--older-than", "90d")
	if !strings.Contains(out, "acme.user") || strings.Contains(out, "globex.") {
		t.Errorf("lake expire over every tenant, globex never synced:\n%s", out)
	}
	cfg = write("Globex")
	code, _, errOut := runCLI(t, "lake", "expire", "--config", cfg, "--older-than", "90d")
	if code != exitUsage || !strings.Contains(errOut, "tenants.Globex") {
		t.Errorf("a tenant name that cannot name a namespace: exit %d, %s", code, errOut)
	}
}
