package lakehouse

import (
	"errors"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name    string
		yaml    string
		key     string // the key the error names; "" for a valid config
		secret  bool   // the error is ErrCredentialInConfig
		warning string
	}{
		{name: "sqlite file", yaml: "catalog: {uri: /var/lib/sepipe/catalog.db}\nwarehouse: file:///srv/lake"},
		{name: "postgres s3", yaml: "catalog: {type: sql, driver: postgres, uri: 'postgres://sepipe@db:5432/lake?sslmode=require'}\n" +
			"warehouse: s3://lake/sepipe\ns3: {endpoint: 'http://127.0.0.1:7070', region: us-east-1, path_style: true}"},
		{name: "rest", yaml: "catalog: {type: rest, uri: 'https://catalog.example.com/api/catalog'}\nwarehouse: analytics"},
		{name: "s3 key in s3 block", yaml: "catalog: {uri: /c.db}\nwarehouse: s3://b/p\ns3: {access_key_id: AKIA, region: eu-west-1}", key: "s3.access_key_id", secret: true},
		{name: "secret at top", yaml: "catalog: {uri: /c.db}\nwarehouse: s3://b/p\nsecret_access_key: x", key: "secret_access_key", secret: true},
		{name: "secret property", yaml: "catalog: {uri: /c.db}\nwarehouse: s3://b/p\nproperties: {s3.secret-access-key: x}", key: "properties.s3.secret-access-key", secret: true},
		{name: "rest token property", yaml: "catalog: {type: rest, uri: 'https://c.example.com'}\nproperties: {token: x}", key: "properties.token", secret: true},
		{name: "password in postgres url", yaml: "catalog: {driver: postgres, uri: 'postgres://sepipe:hunter2@db/lake'}\nwarehouse: s3://b/p", key: "catalog.uri", secret: true},
		{name: "password in dsn", yaml: "catalog: {driver: postgres, uri: 'host=db user=sepipe password=hunter2'}\nwarehouse: s3://b/p", key: "catalog.uri", secret: true},
		{name: "password key in catalog", yaml: "catalog: {driver: postgres, uri: 'host=db', password: x}\nwarehouse: s3://b/p", key: "catalog.password", secret: true},
		{name: "user info in rest url", yaml: "catalog: {type: rest, uri: 'https://u:p@c.example.com'}", key: "catalog.uri", secret: true},
		{name: "unknown key", yaml: "catalog: {uri: /c.db}\nwarehouse: s3://b/p\nbucket: x", key: "bucket"},
		{name: "unknown catalog", yaml: "catalog: {type: glue}\nwarehouse: s3://b/p", key: "catalog.type"},
		{name: "unknown driver", yaml: "catalog: {driver: mysql, uri: x}\nwarehouse: s3://b/p", key: "catalog.driver"},
		{name: "sqlite without path", yaml: "warehouse: s3://b/p", key: "catalog.uri"},
		{name: "no warehouse", yaml: "catalog: {uri: /c.db}", key: "warehouse"},
		{name: "relative file warehouse", yaml: "catalog: {uri: /c.db}\nwarehouse: file://lake", key: "warehouse"},
		{name: "gcs warehouse", yaml: "catalog: {uri: /c.db}\nwarehouse: gs://b/p", key: "warehouse"},
		{name: "bad endpoint", yaml: "catalog: {uri: /c.db}\nwarehouse: s3://b/p\ns3: {endpoint: 127.0.0.1:7070}", key: "s3.endpoint"},
		{name: "bad partition", yaml: "catalog: {uri: /c.db}\nwarehouse: s3://b/p\npartition: month", key: "partition"},
		{name: "dotted namespace", yaml: "catalog: {uri: /c.db}\nwarehouse: s3://b/p\nnamespace: a.b", key: "namespace"},
		{name: "reserved property", yaml: "catalog: {uri: /c.db}\nwarehouse: s3://b/p\nproperties: {s3.endpoint: x}", key: "properties.s3.endpoint"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var cfg Config
			if err := yaml.Unmarshal([]byte(c.yaml), &cfg); err != nil {
				t.Fatal(err)
			}
			cfg.SetDefaults()
			err := cfg.Validate()
			if c.key == "" {
				if err != nil {
					t.Fatalf("valid config refused: %v", err)
				}
				return
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Key != c.key {
				t.Fatalf("error %v; want a *ConfigError naming %s", err, c.key)
			}
			if errors.Is(err, ErrCredentialInConfig) != c.secret {
				t.Fatalf("error %v: credential error %v, want %v", err, !c.secret, c.secret)
			}
			if c.secret && (strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "AKIA")) {
				t.Fatalf("error repeats the secret: %v", err)
			}
		})
	}
}

func TestConfigProperties(t *testing.T) {
	pathStyle := true
	cfg := Config{Catalog: CatalogConfig{URI: "/c.db"}, Warehouse: "s3://lake/p/",
		S3: S3Config{Endpoint: "http://127.0.0.1:7070", Region: "us-east-1", PathStyle: &pathStyle}}
	cfg.SetDefaults()
	p := cfg.catalogProperties()
	want := map[string]string{"warehouse": "s3://lake/p", "s3.endpoint": "http://127.0.0.1:7070", "s3.region": "us-east-1",
		"s3.force-virtual-addressing": "false"}
	for k, v := range want {
		if p[k] != v {
			t.Errorf("property %s = %q, want %q", k, p[k], v)
		}
	}
	for k := range p {
		if secretWord.MatchString(k) {
			t.Errorf("a credential property %s reached the catalog", k)
		}
	}
}

// TestPasswordInDSNWithSpaces pins that Validate refuses a PostgreSQL
// connection string that carries a credential in any form pgx reads
// (pgCredential): "password = x" and "password =x" (spaces around '=',
// as libpq allows), a quoted password, sslpassword, a password in a URL's
// query, and a run-time parameter named like a credential; the error
// names catalog.uri and the key, never the secret. A clean string is
// accepted with PGPASSWORD set, where the password belongs (pgx merges
// it into what it parses).
func TestPasswordInDSNWithSpaces(t *testing.T) {
	t.Setenv("PGPASSWORD", "from-the-environment")
	validate := func(dsn string) error {
		cfg := Config{Catalog: CatalogConfig{Type: CatalogSQL, Driver: DriverPostgres, URI: dsn}, Warehouse: "s3://b/p"}
		cfg.SetDefaults()
		return cfg.Validate()
	}
	for _, c := range []struct{ dsn, key string }{
		{"host=db user=sepipe password = hunter2 dbname=lake", "password"},
		{"host=db user=sepipe password =hunter2 dbname=lake", "password"},
		{"host=db user=sepipe password= hunter2 dbname=lake", "password"},
		{"host=db user=sepipe password='hunter2 x' dbname=lake", "password"},
		{"host=db user=sepipe sslpassword=hunter2 dbname=lake", "sslpassword"},
		{"host=db user=sepipe dbname=lake api_token=hunter2", "api_token"},
		{"postgres://sepipe@db/lake?password=hunter2", "password"},
		{"postgres://sepipe@db/lake?sslmode=require&sslpassword=hunter2", "sslpassword"},
		{"postgresql://sepipe@db/lake?X-Auth-Token=hunter2", "X-Auth-Token"},
	} {
		err := validate(c.dsn)
		var ce *ConfigError
		if !errors.Is(err, ErrCredentialInConfig) || !errors.As(err, &ce) || ce.Key != "catalog.uri" || !strings.Contains(err.Error(), "sets "+c.key+" ") {
			t.Errorf("catalog.uri %q: Validate = %v, want ErrCredentialInConfig naming catalog.uri and %s", c.dsn, err, c.key)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("catalog.uri %q: the error repeats the secret: %v", c.dsn, err)
		}
	}
	for _, dsn := range []string{
		"host=db user=sepipe dbname=lake sslmode=require application_name=sepipe",
		"host = db user = sepipe dbname = lake",
		"postgres://sepipe@db:5432/lake?sslmode=require&target_session_attrs=read-write",
	} {
		if err := validate(dsn); err != nil {
			t.Errorf("catalog.uri %q: clean, with PGPASSWORD set, refused: %v", dsn, err)
		}
	}
	var ce *ConfigError
	if err := validate("host=db password='hunter2"); !errors.As(err, &ce) || ce.Key != "catalog.uri" || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("a connection string pgx cannot read: Validate = %v, want an error naming catalog.uri without its text", err)
	}
}

// TestRunTimeParametersAreNoCredential: PostgreSQL's own settings named
// with "session" are no credentials (the check refused them; found by
// review), while a parameter named like one still is.
func TestRunTimeParametersAreNoCredential(t *testing.T) {
	for dsn, refused := range map[string]bool{
		"host=db user=sepipe dbname=lake idle_in_transaction_session_timeout=60000": false,
		"postgres://sepipe@db/lake?idle_session_timeout=600000":                     false,
		"host=db user=sepipe dbname=lake session_replication_role=replica":          false,
		"host=db user=sepipe dbname=lake application_name=sepipe search_path=lake":  false,
		"host=db user=sepipe dbname=lake api_token=abc":                             true,
	} {
		cfg := Config{Catalog: CatalogConfig{Type: CatalogSQL, Driver: DriverPostgres, URI: dsn}, Warehouse: "s3://b/p"}
		cfg.SetDefaults()
		if err := cfg.Validate(); errors.Is(err, ErrCredentialInConfig) != refused {
			t.Errorf("catalog.uri %q: Validate = %v, want refused %v", dsn, err, refused)
		}
	}
}
