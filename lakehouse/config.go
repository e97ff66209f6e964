package lakehouse

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// Catalog types.
const (
	CatalogSQL  = "sql"  // a SQL database holds each table's metadata pointer
	CatalogREST = "rest" // any Iceberg REST catalog
)

// SQL catalog drivers.
const (
	DriverSQLite   = "sqlite"   // one machine: a file (modernc.org/sqlite, pure Go)
	DriverPostgres = "postgres" // a shared catalog (github.com/jackc/pgx/v5)
)

// Partition transforms of the day column.
const (
	PartitionIdentity = "identity" // snapshot_date=2024-05-01 (default)
	PartitionDay      = "day"      // snapshot_date_day=2024-05-01 (a name no column has: dayPartitionFor)
)

// DefaultNamespace is where tables live when the caller names none.
const DefaultNamespace = "sepipe"

// Config is an Iceberg lake destination as users write it, under
// output.lake.iceberg in sepipe's YAML:
//
//	iceberg:
//	  catalog:
//	    type: sql                   # sql or rest
//	    driver: sqlite              # sql: sqlite or postgres
//	    uri: /var/lib/sepipe/catalog.db
//	  warehouse: s3://lake/sepipe   # or file:///srv/lake
//	  namespace: sepipe
//	  s3:
//	    endpoint: http://127.0.0.1:7070
//	    region: us-east-1
//	    path_style: true
//
// It holds no credentials and refuses any: S3 keys come from the standard
// AWS environment variables and files (AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY, AWS_PROFILE, ~/.aws/credentials), PostgreSQL's
// password from PGPASSWORD or ~/.pgpass, a REST catalog's token from
// SEPIPE_ICEBERG_REST_TOKEN or SEPIPE_ICEBERG_REST_CREDENTIAL.
type Config struct {
	Catalog CatalogConfig `yaml:"catalog"`
	// Warehouse is where table files live: file:///abs/path or
	// s3://bucket/prefix. For a REST catalog it is passed as the catalog's
	// "warehouse" property (a location or, for some servers, a name) and
	// may be empty.
	Warehouse string `yaml:"warehouse"`
	// Namespace holds the tables (default "sepipe"; with tenants, the tenant's name).
	Namespace string `yaml:"namespace"`
	// S3 configures object storage when Warehouse is s3://.
	S3 S3Config `yaml:"s3"`
	// Partition is the day column's transform: identity (default) or day.
	Partition string `yaml:"partition"`
	// Properties are passed to the catalog as they are (for example
	// rest.signing-name or s3.connect-timeout). Keys that carry
	// credentials are refused.
	Properties map[string]string `yaml:"properties"`

	// Extra catches keys this version does not know, so that Validate
	// can name them (a credential among them is refused by name).
	Extra map[string]any `yaml:",inline"`
}

// CatalogConfig says which catalog holds the tables' metadata pointers.
type CatalogConfig struct {
	// Type is sql or rest.
	Type string `yaml:"type"`
	// Name is the catalog's name, recorded in every row of a SQL catalog
	// (default "sepipe"); engines attaching the catalog use the same one.
	Name string `yaml:"name"`
	// Driver is the SQL catalog's database: sqlite or postgres.
	Driver string `yaml:"driver"`
	// URI locates the catalog: a file path (sqlite), a postgres:// URL or
	// key=value DSN without a password (postgres), or the REST endpoint.
	URI string `yaml:"uri"`

	Extra map[string]any `yaml:",inline"`
}

// S3Config is how object storage is reached. Credentials are never part
// of it.
type S3Config struct {
	// Endpoint is the S3 API's URL, for S3-compatible stores (MinIO,
	// versitygw, Ceph, R2); empty means AWS.
	Endpoint string `yaml:"endpoint"`
	// Region is the bucket's region (default: AWS_REGION or the AWS
	// config files).
	Region string `yaml:"region"`
	// PathStyle addresses buckets as endpoint/bucket instead of
	// bucket.endpoint. Unset means path style when Endpoint is set and
	// virtual-hosted style on AWS.
	PathStyle *bool `yaml:"path_style"`

	Extra map[string]any `yaml:",inline"`
}

// ConfigError names the key at fault, relative to the iceberg block
// (catalog.uri, s3.endpoint, ...).
type ConfigError struct {
	Key string
	Err error
}

func (e *ConfigError) Error() string { return fmt.Sprintf("iceberg config: %s: %v", e.Key, e.Err) }
func (e *ConfigError) Unwrap() error { return e.Err }

// ErrCredentialInConfig is wrapped by the ConfigError of a key that would
// put a credential in the config file.
var ErrCredentialInConfig = errors.New("credentials are never read from the config file")

// SetDefaults fills what the user left out.
func (c *Config) SetDefaults() {
	if c.Catalog.Type == "" {
		c.Catalog.Type = CatalogSQL
	}
	if c.Catalog.Type == CatalogSQL && c.Catalog.Driver == "" {
		c.Catalog.Driver = DriverSQLite
	}
	if c.Catalog.Name == "" {
		c.Catalog.Name = "sepipe"
	}
	if c.Namespace == "" {
		c.Namespace = DefaultNamespace
	}
	if c.Partition == "" {
		c.Partition = PartitionIdentity
	}
}

// secretWord matches a key or property that would carry a credential.
var secretWord = regexp.MustCompile(`(?i)(secret|password|passwd|token|credential|access[-_.]?key|session|private[-_.]?key|sas[-_.]?token|account[-_.]?key|jsonkey|keypath)`)

// pgSecretWord is secretWord for a PostgreSQL run-time parameter, less
// "session": PostgreSQL's own settings idle_session_timeout,
// idle_in_transaction_session_timeout and session_replication_role are
// no credentials (refused by the first version of this check; found by
// review).
var pgSecretWord = regexp.MustCompile(`(?i)(secret|password|passwd|token|credential|access[-_.]?key|private[-_.]?key|sas[-_.]?token|account[-_.]?key|jsonkey|keypath)`)

// credentialHelp says where a credential belongs instead.
const credentialHelp = "S3 keys come from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE or ~/.aws/credentials; " +
	"the PostgreSQL password from PGPASSWORD or ~/.pgpass; a REST catalog's token from SEPIPE_ICEBERG_REST_TOKEN or SEPIPE_ICEBERG_REST_CREDENTIAL"

func extraErr(prefix string, extra map[string]any, known ...string) error {
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if secretWord.MatchString(k) {
			return &ConfigError{Key: prefix + k, Err: fmt.Errorf("%w (%s)", ErrCredentialInConfig, credentialHelp)}
		}
	}
	if len(keys) > 0 {
		return &ConfigError{Key: prefix + keys[0], Err: fmt.Errorf("unknown key (want %s)", strings.Join(known, ", "))}
	}
	return nil
}

// Validate reports the first key at fault as a *ConfigError. Call
// SetDefaults first.
func (c *Config) Validate() error {
	if err := extraErr("", c.Extra, "catalog", "warehouse", "namespace", "s3", "partition", "properties"); err != nil {
		return err
	}
	if err := extraErr("catalog.", c.Catalog.Extra, "type", "name", "driver", "uri"); err != nil {
		return err
	}
	if err := extraErr("s3.", c.S3.Extra, "endpoint", "region", "path_style"); err != nil {
		return err
	}
	bad := func(key, format string, args ...any) error {
		return &ConfigError{Key: key, Err: fmt.Errorf(format, args...)}
	}
	switch c.Catalog.Type {
	case CatalogSQL:
		switch c.Catalog.Driver {
		case DriverSQLite:
			if c.Catalog.URI == "" {
				return bad("catalog.uri", "the SQLite catalog needs a file path")
			}
			if strings.HasPrefix(c.Catalog.URI, "file:") || strings.Contains(c.Catalog.URI, "?") {
				return bad("catalog.uri", "want a plain file path, not a URI (sepipe sets the SQLite options itself)")
			}
		case DriverPostgres:
			if c.Catalog.URI == "" {
				return bad("catalog.uri", "the PostgreSQL catalog needs a postgres:// URL or key=value connection string")
			}
			key, err := pgCredential(c.Catalog.URI)
			if err != nil {
				return &ConfigError{Key: "catalog.uri", Err: err}
			}
			if key != "" {
				return &ConfigError{Key: "catalog.uri", Err: fmt.Errorf("%w: the connection string sets %s (%s)", ErrCredentialInConfig, key, credentialHelp)}
			}
		default:
			return bad("catalog.driver", "unknown driver %q (want %s or %s)", c.Catalog.Driver, DriverSQLite, DriverPostgres)
		}
	case CatalogREST:
		if c.Catalog.Driver != "" {
			return bad("catalog.driver", "a REST catalog has no driver")
		}
		u, err := url.Parse(c.Catalog.URI)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return bad("catalog.uri", "want the REST catalog's http(s):// URL, got %q", c.Catalog.URI)
		}
		if u.User != nil {
			return &ConfigError{Key: "catalog.uri", Err: fmt.Errorf("%w: the URL holds user information (%s)", ErrCredentialInConfig, credentialHelp)}
		}
		if q := u.Query(); slices.ContainsFunc(slices.Collect(maps.Keys(q)), secretWord.MatchString) {
			return &ConfigError{Key: "catalog.uri", Err: fmt.Errorf("%w: the URL's query holds a credential (%s)", ErrCredentialInConfig, credentialHelp)}
		}
	default:
		return bad("catalog.type", "unknown catalog type %q (want %s or %s)", c.Catalog.Type, CatalogSQL, CatalogREST)
	}
	if c.Catalog.Name == "" || strings.ContainsAny(c.Catalog.Name, " ./\\") {
		return bad("catalog.name", "want a name without spaces, dots or slashes, got %q", c.Catalog.Name)
	}

	if c.Warehouse == "" && c.Catalog.Type == CatalogSQL {
		return bad("warehouse", "the SQL catalog needs a warehouse location (file:///path or s3://bucket/prefix)")
	}
	if c.Warehouse != "" {
		u, err := url.Parse(c.Warehouse)
		switch {
		case err != nil:
			return bad("warehouse", "not a URL: %v", err)
		case u.User != nil:
			return &ConfigError{Key: "warehouse", Err: fmt.Errorf("%w: the location holds user information", ErrCredentialInConfig)}
		case u.Scheme != "" && strings.ContainsAny(c.Warehouse, "?#"):
			// iceberg-go reads a file:// location as a URL and engines read
			// s3:// ones alike: the path would end at the '?' or '#'.
			return bad("warehouse", "want a location without '?' or '#' (a URL's path ends there, so the files would go elsewhere), got %q", c.Warehouse)
		case u.Scheme == "file":
			if u.Host != "" || !filepath.IsAbs(u.Path) {
				return bad("warehouse", "want file:///absolute/path, got %q", c.Warehouse)
			}
		case u.Scheme == "s3" || u.Scheme == "s3a":
			if u.Host == "" {
				return bad("warehouse", "want s3://bucket/prefix, got %q", c.Warehouse)
			}
		case c.Catalog.Type == CatalogREST && u.Scheme == "":
			// a warehouse name the REST server resolves
		default:
			return bad("warehouse", "unsupported location %q (want file:///path or s3://bucket/prefix)", c.Warehouse)
		}
	}

	if c.S3.Endpoint != "" {
		u, err := url.Parse(c.S3.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return bad("s3.endpoint", "want an http(s):// URL, got %q", c.S3.Endpoint)
		}
		if u.User != nil {
			return &ConfigError{Key: "s3.endpoint", Err: fmt.Errorf("%w: the URL holds user information (%s)", ErrCredentialInConfig, credentialHelp)}
		}
	}
	if c.S3.Region != "" && strings.ContainsAny(c.S3.Region, " /") {
		return bad("s3.region", "not a region: %q", c.S3.Region)
	}

	if c.Namespace == "" || strings.ContainsAny(c.Namespace, "./\\ \x00") {
		return bad("namespace", "want a name without dots, slashes or spaces, got %q", c.Namespace)
	}
	switch c.Partition {
	case PartitionIdentity, PartitionDay:
	default:
		return bad("partition", "unknown transform %q (want %s or %s)", c.Partition, PartitionIdentity, PartitionDay)
	}
	for _, k := range slices.Sorted(maps.Keys(c.Properties)) {
		if secretWord.MatchString(k) {
			return &ConfigError{Key: "properties." + k, Err: fmt.Errorf("%w (%s)", ErrCredentialInConfig, credentialHelp)}
		}
		if reserved[k] {
			return bad("properties."+k, "set by sepipe from the config's own keys; use those")
		}
	}
	return nil
}

// reserved are the catalog properties sepipe derives from Config.
var reserved = map[string]bool{
	"type": true, "uri": true, "warehouse": true, "sql.driver": true, "sql.dialect": true,
	"s3.endpoint": true, "s3.region": true, "s3.force-virtual-addressing": true,
}

// pgPlainKeys are the connection-string keys pgx reads itself
// (pgconn.ParseConfig) that carry no credential. Of the others it reads,
// password and sslpassword are credentials; any key it does not know is
// a run-time parameter sent to the server.
var pgPlainKeys = []string{"host", "port", "dbname", "user", "passfile", "connect_timeout", "sslmode", "ssl",
	"sslkey", "sslcert", "sslcertmode", "sslrootcert", "sslnegotiation", "sslsni", "krbspn", "krbsrvname",
	"target_session_attrs", "service", "servicefile", "min_protocol_version", "max_protocol_version",
	"channel_binding", "require_auth"}

// pgCredential returns the key of a PostgreSQL connection string (a
// postgres:// URL or key=value DSN) that carries a credential, "" for
// none, as pgx reads the string: in any of its spellings (password =
// x, password =x, a quoted value, a URL's user information or query),
// password or sslpassword, or a run-time parameter whose name looks like
// a credential (pgSecretWord: secretWord, the rule of every other key,
// less the word session, which PostgreSQL settings use). A string pgx
// cannot read is an error.
//
// pgx merges PGPASSWORD and ~/.pgpass into the password it parses, and
// they are where the password belongs, so the parsed password does not
// say whether the string holds one. Which keys the string itself sets
// comes from ParseConfigWithOptions: a key not in ConnStringAllowedKeys
// is refused, and only the string's keys are checked.
func pgCredential(dsn string) (string, error) {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		// pgx's message may quote the string; say only which file it
		// could not read, if that was it.
		if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
			return "", fmt.Errorf("pgx cannot read the connection string: %w", pe)
		}
		return "", errors.New("pgx cannot read it as a postgres:// URL or key=value connection string")
	}
	params := slices.Sorted(maps.Keys(cfg.RuntimeParams))
	for _, k := range params {
		if pgSecretWord.MatchString(k) {
			return k, nil
		}
	}
	sets := func(keys ...string) bool { // the string sets a key outside keys
		allowed := slices.Concat(pgPlainKeys, params, keys)
		_, err := pgconn.ParseConfigWithOptions(dsn, pgconn.ParseConfigOptions{ConnStringAllowedKeys: allowed})
		return err != nil
	}
	switch {
	case sets("password", "sslpassword"):
		// pgx reads a key sepipe does not know: fail closed.
		return "", errors.New("the connection string sets a key sepipe cannot tell is no credential")
	case sets("sslpassword"):
		return "password", nil
	case sets("password"):
		return "sslpassword", nil
	}
	return "", nil
}
