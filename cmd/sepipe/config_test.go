package main

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestParseConfigMessages pins what the yaml.v3 decoding says about each
// kind of fault: file, line, key path, and what was wanted.
func TestParseConfigMessages(t *testing.T) {
	cases := []struct{ name, yaml, want string }{
		{"unknown key", "service:\n  tenant: x\n", `c.yaml:2: service.tenant: unknown key "tenant" (want tenant_url, legacy_url, v4_url, webhooks_url, oauth)`},
		{"given twice", "log:\n  level: info\n  level: debug\n", "c.yaml:3: log.level: given twice"},
		{"stream given twice", "streams:\n  user: {}\n  user: {}\n", "c.yaml:3: streams.user: given twice"},
		{"not a mapping", "service: x\n", `c.yaml:1: service: want a mapping of keys, got "x"`},
		{"not a list", "include: {a: b}\n", "c.yaml:1: include: want a list, got a mapping"},
		{"not a single value", "log:\n  level: [a]\n", "c.yaml:2: log.level: want a single value, got a list"},
		{"not a whole number", "requests:\n  page_size: lots\n", `c.yaml:2: requests.page_size: want a whole number, got "lots"`},
		{"a fraction", "requests:\n  concurrency: 2.5\n", `c.yaml:2: requests.concurrency: want a whole number, got "2.5"`},
		{"not a number", "requests:\n  rate: fast\n", `c.yaml:2: requests.rate: want a number, got "fast"`},
		{"bad duration", "requests:\n  max_wait: soon\n", `c.yaml:2: requests.max_wait: bad duration "soon"`},
		{"duration not scalar", "requests:\n  timeout: [1s]\n", "c.yaml:2: requests.timeout: want a duration such as 90m, 6h or 7d, got a list"},
		{"secret not scalar", "credentials:\n  api_token: {a: b}\n", "c.yaml:2: credentials.api_token: want a ${ENV_VAR} reference, got a mapping"},
		{"unset variable", "output:\n  dir: ${SEPIPE_TEST_UNSET_X}/d\n", "c.yaml:2: output.dir: ${SEPIPE_TEST_UNSET_X} is not set"},
		{"unset variable in a filter", "streams:\n  user:\n    filters:\n      - {field: f, operator: eq, values: [\"${SEPIPE_TEST_UNSET_X}\"]}\n", "c.yaml:4: streams.user.filters[0].values[0]: ${SEPIPE_TEST_UNSET_X} is not set"},
		{"unknown filter key", "streams:\n  user:\n    filters:\n      - {field: f, op: eq}\n", `c.yaml:4: streams.user.filters[0].op: unknown key "op" (want field, operator, values)`},
		{"not yaml", "log:\n\tlevel: info\n", "c.yaml:2: not valid YAML"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseConfig("c.yaml", []byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestParseConfigValues: references expand in every value but a
// credential, numbers may be quoted or references, a bare string is a
// list of one, an empty key leaves the default, and every key keeps its
// line.
func TestParseConfigValues(t *testing.T) {
	t.Setenv("SEPIPE_TEST_N", "4")
	t.Setenv("SEPIPE_TEST_DIR", "/data")
	t.Setenv("SEPIPE_TEST_TOKEN", "token-123456")
	const doc = `service:
  tenant_url: https://acme.example.com
credentials:
  access_token: ${SEPIPE_TEST_TOKEN}
  api_token: literal-token
legacy:
  password: ${SEPIPE_TEST_UNSET_SECRET_X}
include: course
streams:
  user:
    lookback: &lb 2d
    filters:
      - {field: n, operator: be, values: [1, "${SEPIPE_TEST_N}"]}
  course:
    lookback: *lb
requests:
  concurrency: ${SEPIPE_TEST_N}
  page_size: "200"
  rate: 2.5
  max_wait:
output:
  dir: ${SEPIPE_TEST_DIR}/sepipe
`
	c, err := parseConfig("c.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if c.Credentials.AccessToken.Ref != "${SEPIPE_TEST_TOKEN}" || c.Credentials.AccessToken.Value.Reveal() != "token-123456" {
		t.Errorf("access token: %q", c.Credentials.AccessToken.Ref)
	}
	if p := c.Legacy.Password; p.Ref != "${SEPIPE_TEST_UNSET_SECRET_X}" || p.Set() {
		t.Errorf("an unset credential: %+v", p.Ref)
	}
	if len(c.Warnings()) != 1 || !strings.HasPrefix(c.Warnings()[0], "c.yaml:5: credentials.api_token holds a literal secret") {
		t.Errorf("warnings: %q", c.Warnings())
	}
	if len(c.Include) != 1 || c.Include[0] != "course" {
		t.Errorf("include: %q", c.Include)
	}
	u := c.Streams["user"]
	if time.Duration(u.Lookback) != 48*time.Hour || time.Duration(c.Streams["course"].Lookback) != 48*time.Hour {
		t.Errorf("lookbacks: %v %v", u.Lookback, c.Streams["course"].Lookback)
	}
	if v := u.Filters[0].Values; len(v) != 2 || v[0] != 1 || v[1] != "4" {
		t.Errorf("filter values: %#v", v)
	}
	r := c.Requests
	if r.Concurrency != 4 || r.PageSize != 200 || r.Rate != 2.5 || r.MaxWait != 0 {
		t.Errorf("requests: %+v", r)
	}
	if c.Output.Dir != "/data/sepipe" {
		t.Errorf("output.dir: %q", c.Output.Dir)
	}
	for key, line := range map[string]int{"service.tenant_url": 2, "include[0]": 8, "streams.user.filters[0].operator": 13, "streams.course.lookback": 15, "requests.max_wait": 20, "output.dir": 22} {
		if got := c.line(key); got != line {
			t.Errorf("line of %s: %d, want %d", key, got, line)
		}
	}
}

// TestValidateStreams: the stream rules are pipeline's; the messages name
// the key.
func TestValidateStreams(t *testing.T) {
	cases := []struct{ name, streams, want string }{
		{"in without values", "user:\n    filters:\n      - {field: s, operator: in}\n", "c.yaml:6: streams.user.filters[0].values: operator in needs at least one value"},
		{"be with one value", "user:\n    filters:\n      - {field: s, operator: be, values: [1]}\n", "c.yaml:6: streams.user.filters[0].values: operator be takes 2 value(s), got 1"},
		{"no field", "user:\n    filters:\n      - {operator: eq, values: [1]}\n", "c.yaml:6: streams.user.filters[0].field: is required"},
		{"lookback without cursor", "user:\n    lookback: 1h\n", "c.yaml:5: streams.user.lookback: needs a cursor"},
		{"bad contract", "user:\n    contract: melt\n", `c.yaml:5: streams.user.contract: unknown schema contract "melt"`},
		{"collection cursor", "assets:\n    cursor: updated\n", "c.yaml:5: streams.assets.cursor: a collection cannot be read incrementally"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseConfig("c.yaml", []byte("service:\n  tenant_url: https://acme.example.com\nstreams:\n  "+tc.streams))
			if err != nil {
				t.Fatal(err)
			}
			c.SetDefaults()
			if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestIcebergConfig: output.lake.iceberg decodes into lakehouse.Config and
// is checked by lakehouse.Config.Validate, its messages naming the file's
// key and line; without the block the lake is the local folder alone.
func TestIcebergConfig(t *testing.T) {
	const head = "service:\n  tenant_url: https://acme.example.com\noutput:\n  dir: /data/sepipe\n"
	t.Run("absent", func(t *testing.T) {
		c, err := parseConfig("c.yaml", []byte(head))
		if err != nil {
			t.Fatal(err)
		}
		c.SetDefaults()
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		if c.Output.Lake.Iceberg != nil {
			t.Fatalf("no iceberg block, got %+v", c.Output.Lake.Iceberg)
		}
	})
	t.Run("good", func(t *testing.T) {
		t.Setenv("SEPIPE_TEST_S3", "http://127.0.0.1:7070")
		c, err := parseConfig("c.yaml", []byte(head+`  lake:
    iceberg:
      catalog:
        type: sql
        driver: sqlite
        uri: /data/catalog.db
      warehouse: s3://lake/sepipe
      partition: day
      s3:
        endpoint: ${SEPIPE_TEST_S3}
        region: eu-central-1
        path_style: true
      properties:
        s3.connect-timeout: 10s
`))
		if err != nil {
			t.Fatal(err)
		}
		c.SetDefaults()
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		ic := c.Output.Lake.Iceberg
		if ic == nil || ic.Catalog.Driver != "sqlite" || ic.Catalog.URI != "/data/catalog.db" || ic.Warehouse != "s3://lake/sepipe" ||
			ic.Partition != "day" || ic.S3.Endpoint != "http://127.0.0.1:7070" || ic.S3.PathStyle == nil || !*ic.S3.PathStyle ||
			ic.Properties["s3.connect-timeout"] != "10s" {
			t.Fatalf("decoded %+v", ic)
		}
		if ic.Namespace != "sepipe" || ic.Catalog.Name != "sepipe" {
			t.Errorf("defaults: namespace %q, catalog name %q", ic.Namespace, ic.Catalog.Name)
		}
	})
	cases := []struct{ name, block, want string }{
		{"no warehouse", "      catalog: {type: sql, driver: sqlite, uri: /data/c.db}\n",
			"c.yaml:6: output.lake.iceberg.warehouse: the SQL catalog needs a warehouse location"},
		{"bad driver", "      catalog:\n        type: sql\n        driver: mysql\n        uri: x\n      warehouse: file:///lake\n",
			`c.yaml:9: output.lake.iceberg.catalog.driver: unknown driver "mysql"`},
		{"password in the uri", "      catalog:\n        driver: postgres\n        uri: postgres://u:pw@db/lake\n      warehouse: s3://b/p\n",
			"c.yaml:9: output.lake.iceberg.catalog.uri: credentials are never read from the config file"},
		{"a credential key", "      catalog: {uri: /data/c.db}\n      warehouse: s3://b/p\n      s3:\n        secret_access_key: abc\n",
			"c.yaml:10: output.lake.iceberg.s3.secret_access_key: credentials are never read from the config file"},
		{"an unknown key", "      catalog: {uri: /data/c.db}\n      warehouse: s3://b/p\n      bucket: b\n",
			`c.yaml:9: output.lake.iceberg.bucket: unknown key (want catalog, warehouse`},
		{"path_style not a bool", "      catalog: {uri: /data/c.db}\n      warehouse: s3://b/p\n      s3:\n        path_style: sometimes\n",
			`c.yaml:10: output.lake.iceberg.s3.path_style: want true or false, got "sometimes"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseConfig("c.yaml", []byte(head+"  lake:\n    iceberg:\n"+tc.block))
			if err == nil {
				c.SetDefaults()
				err = c.Validate()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestLimits: output.max_value_bytes reaches the sync's config;
// a negative one is refused naming the key and line. So for
// requests.max_pages.
func TestLimits(t *testing.T) {
	c, err := parseConfig("c.yaml", []byte("service:\n  tenant_url: https://acme.example.com\noutput:\n  max_value_bytes: 1048576\n"))
	if err != nil {
		t.Fatal(err)
	}
	c.SetDefaults()
	if err := c.Validate(); err != nil || c.Output.MaxValueBytes != 1<<20 {
		t.Fatalf("max_value_bytes %d, err %v", c.Output.MaxValueBytes, err)
	}
	c, err = parseConfig("c.yaml", []byte("service:\n  tenant_url: https://acme.example.com\noutput:\n  max_value_bytes: -1\n"))
	if err != nil {
		t.Fatal(err)
	}
	c.SetDefaults()
	const want = "c.yaml:4: output.max_value_bytes: want at least 1 byte (or 0 for the default), got -1"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want %q", err, want)
	}
	c, err = parseConfig("c.yaml", []byte("service:\n  tenant_url: https://acme.example.com\nrequests:\n  max_pages: -3\n"))
	if err != nil {
		t.Fatal(err)
	}
	c.SetDefaults()
	const wantPages = "c.yaml:4: requests.max_pages: want at least 1 page (or 0 for the default), got -3"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), wantPages) {
		t.Fatalf("err = %v, want %q", err, wantPages)
	}
}

// TestConfigIsOneDocument: settings after a "---" are an error naming
// the line, not dropped (the streams and the unknown key below were
// ignored and the run went on with defaults; found by review).
func TestConfigIsOneDocument(t *testing.T) {
	doc := "service:\n  tenant_url: https://acme.example.com\n---\nstreams:\n  userCourseProgress:\n    mode: merge\n    primary_key: [userId, courseId]\ncolour: blue\n"
	_, err := parseConfig("sepipe.yaml", []byte(doc))
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Line != 3 || !strings.Contains(ce.Msg, "second YAML document") {
		t.Errorf("a second document: %v; want a ConfigError at line 3 (the ---)", err)
	}
	if _, err := parseConfig("sepipe.yaml", []byte("---\nservice:\n  tenant_url: https://acme.example.com\n")); err != nil {
		t.Errorf("one document after a leading ---: %v", err)
	}
}
