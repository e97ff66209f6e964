package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	"go.yaml.in/yaml/v3"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/lakehouse"
	"github.com/sepipe/sepipe/load"
	"github.com/sepipe/sepipe/pipeline"
	"github.com/sepipe/sepipe/schemas"
)

// defaultConfigFile is read when --config is not given and the file exists.
const defaultConfigFile = "sepipe.yaml"

// Config is sepipe.yaml: what users write. Load decodes it (line numbers
// kept for messages), SetDefaults fills what it leaves out, Validate checks
// it without touching the network.
type Config struct {
	Service     ServiceConfig           `yaml:"service"`
	Credentials CredentialsConfig       `yaml:"credentials"`
	Legacy      LegacyConfig            `yaml:"legacy"`
	Include     []string                `yaml:"include"`
	Exclude     []string                `yaml:"exclude"`
	Streams     map[string]StreamConfig `yaml:"streams"`
	Requests    RequestsConfig          `yaml:"requests"`
	Output      OutputConfig            `yaml:"output"`
	Log         LogConfig               `yaml:"log"`
	Schedule    ScheduleConfig          `yaml:"schedule"`
	Webhooks    WebhooksConfig          `yaml:"webhooks"`
	Dashboard   DashboardConfig         `yaml:"dashboard"`
	Metrics     MetricsConfig           `yaml:"metrics"`
	// Tenants, when listed, replace service, credentials and legacy: each
	// command works on the one --tenant names (UseTenant).
	Tenants map[string]TenantConfig `yaml:"tenants"`

	tenant string         // the tenant UseTenant chose ("" for a config without tenants)
	file   string         // path it was read from ("" when there is no file)
	lines  map[string]int // key path -> line
	warns  []string       // literal secrets and the like
}

// TenantConfig is one tenant of a config that serves several (an agency,
// a group of tenant sites): its own service URLs, credentials (by
// ${ENV_VAR} reference) and legacy login. Everything else (streams,
// requests, output, schedule) is shared. Its data, state and runs live in
// <output.dir>/<tenant>, a folder of its own.
type TenantConfig struct {
	Service     ServiceConfig     `yaml:"service"`
	Credentials CredentialsConfig `yaml:"credentials"`
	Legacy      LegacyConfig      `yaml:"legacy"`
}

// ServiceConfig holds the four base URLs; only tenant_url is required.
type ServiceConfig struct {
	TenantURL   string      `yaml:"tenant_url"`
	LegacyURL   string      `yaml:"legacy_url"`   // default tenant_url
	V4URL       string      `yaml:"v4_url"`       // default tenant_url + /v4
	WebhooksURL string      `yaml:"webhooks_url"` // default tenant_url + /webhooks/v1
	OAuth       OAuthConfig `yaml:"oauth"`
}

// OAuthConfig is the OAuth 2.0 client that refreshes the access token.
// The secrets are ${ENV_VAR} references; each defaults to its environment
// variable (SEPIPE_OAUTH_CLIENT_ID, SEPIPE_OAUTH_CLIENT_SECRET,
// SEPIPE_REFRESH_TOKEN).
type OAuthConfig struct {
	ClientID     Secret `yaml:"client_id"`
	ClientSecret Secret `yaml:"client_secret"`
	RefreshToken Secret `yaml:"refresh_token"`
	TokenURL     string `yaml:"token_url"` // default tenant_url + /api/v3/oauth2/token
}

// CredentialsConfig holds the tokens, as ${ENV_VAR} references.
type CredentialsConfig struct {
	AccessToken Secret `yaml:"access_token"` // reporting, v3, v4 (default ${SEPIPE_ACCESS_TOKEN})
	APIToken    Secret `yaml:"api_token"`    // webhooks (default ${SEPIPE_API_TOKEN})
}

// LegacyConfig is the legacy session login.
type LegacyConfig struct {
	LoginDir string `yaml:"login_dir"`
	Username string `yaml:"username"`
	Password Secret `yaml:"password"`
}

// StreamConfig configures one report object.
type StreamConfig struct {
	Mode       string         `yaml:"mode"`
	PrimaryKey []string       `yaml:"primary_key"`
	Cursor     string         `yaml:"cursor"`
	Lookback   Duration       `yaml:"lookback"`
	Contract   string         `yaml:"contract"`
	Filters    []FilterConfig `yaml:"filters"`
}

// FilterConfig is one filter sent with every read of a stream.
type FilterConfig struct {
	Field    string `yaml:"field"`
	Operator string `yaml:"operator"`
	Values   []any  `yaml:"values"`
}

// RequestsConfig is the load sepipe puts on the service.
type RequestsConfig struct {
	Concurrency       int      `yaml:"concurrency"`        // pages in flight per object
	ObjectConcurrency int      `yaml:"object_concurrency"` // objects read at once
	Rate              float64  `yaml:"rate"`               // ceiling on requests per second, all workers; 0: none, the rate adapts
	Burst             int      `yaml:"burst"`              // 0: automatic
	PageSize          int      `yaml:"page_size"`
	MaxAttempts       int      `yaml:"max_attempts"`
	MaxWait           Duration `yaml:"max_wait"`
	Timeout           Duration `yaml:"timeout"`             // connect, headers, and any stall in a body
	MaxResponseBytes  int      `yaml:"max_response_bytes"`  // a larger response fails its stream
	MaxBytesInFlight  int      `yaml:"max_bytes_in_flight"` // response bodies held at once (default 4 × max_response_bytes)
	MaxPages          int      `yaml:"max_pages"`           // pages one read may take (default extract.DefaultMaxPages)
}

// OutputConfig says where the lake and the warehouse go.
type OutputConfig struct {
	Dir  string     `yaml:"dir"`
	Lake LakeConfig `yaml:"lake"`
	// MaxValueBytes: a longer value is null in its table and kept whole
	// in a file of the lake (pipeline.Config.MaxValueBytes; default 16 MiB).
	MaxValueBytes int `yaml:"max_value_bytes"`
}

// LakeConfig adds lake destinations to the output folder's own lake
// (hive-partitioned Parquet under dir/lake, which the warehouse loads
// from and which is always written).
type LakeConfig struct {
	// Iceberg, when given, is an Iceberg warehouse each run also commits
	// to (docs/scale-out.md); its keys and rules are lakehouse.Config's.
	Iceberg *lakehouse.Config `yaml:"iceberg"`
}

// LogConfig sets the log level and format.
type LogConfig struct {
	Level  string `yaml:"level"`
	Format string `yaml:"format"`
}

// ScheduleConfig is read by 'sepipe schedule'.
type ScheduleConfig struct {
	Cron     string `yaml:"cron"`
	TimeZone string `yaml:"time_zone"`
	// Retries: how many times a failed run is tried again before the next
	// scheduled run (default 2; 0: never), the first after RetryDelay
	// (default 10m), each later one after twice the wait before it.
	Retries    *int     `yaml:"retries"`
	RetryDelay Duration `yaml:"retry_delay"`
}

// WebhooksConfig is read by 'sepipe listen'.
type WebhooksConfig struct {
	Listen  string   `yaml:"listen"`
	Secrets []Secret `yaml:"secrets"`
	// PublishInterval: how often loaded events are published to
	// warehouse.duckdb (default 10s).
	PublishInterval Duration `yaml:"publish_interval"`
}

// DashboardConfig is read by 'sepipe dashboard'.
type DashboardConfig struct {
	Addr      string `yaml:"addr"`
	PanelsDir string `yaml:"panels_dir"`
	// AllowedHosts: host names the dashboard answers besides localhost,
	// IP addresses and the host of Addr (dashboard.ParseAllowedHosts).
	AllowedHosts []string `yaml:"allowed_hosts"`
}

// Secret is a credential: Ref is what the file says (normally
// "${ENV_VAR}"), Value what it expanded to. It never prints its value.
type Secret struct {
	Ref   string
	Value extract.Secret
}

// Set reports whether the secret has a value after expansion.
func (s Secret) Set() bool { return s.Value != "" }

// String names the secret by its reference, never its value.
func (s Secret) String() string {
	if isEnvRef(s.Ref) {
		return s.Ref
	}
	return "<literal>"
}

// Duration is a time.Duration written as "90m", "6h" or "7d".
type Duration time.Duration

// ParseDuration reads a Go duration, with d for days.
func ParseDuration(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.ParseFloat(n, 64)
		if err != nil || days < 0 {
			return 0, fmt.Errorf("bad duration %q (want e.g. 90m, 6h or 7d)", s)
		}
		return time.Duration(days * float64(24*time.Hour)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("bad duration %q (want e.g. 90m, 6h or 7d)", s)
	}
	return d, nil
}

// ConfigError names the file, line and key at fault.
type ConfigError struct {
	File string
	Line int
	Key  string
	Msg  string
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			fmt.Fprintf(&b, ":%d", e.Line)
		}
		b.WriteString(": ")
	}
	if e.Key != "" {
		b.WriteString(e.Key + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// errf returns a *ConfigError at key, wrapped as a usage error.
func (c *Config) errf(key, format string, a ...any) error {
	key = c.tenantKey(key)
	return usageError{&ConfigError{File: c.file, Line: c.line(key), Key: key, Msg: fmt.Sprintf(format, a...)}}
}

// line returns the line of key, or of its closest parent written in the file.
func (c *Config) line(key string) int {
	for k := c.tenantKey(key); k != ""; {
		if l, ok := c.lines[k]; ok {
			return l
		}
		i := strings.LastIndexAny(k, ".[")
		if i < 0 {
			break
		}
		k = k[:i]
	}
	return 0
}

// File is the path the config was read from, "" without a file.
func (c *Config) File() string { return c.file }

// Warnings are things that load but should be fixed (literal secrets).
func (c *Config) Warnings() []string { return c.warns }

// LoadConfig reads path. A missing default file is not an error: it
// returns an empty config (explicit is false).
func LoadConfig(path string, explicit bool) (*Config, error) {
	if path == "" {
		path = defaultConfigFile
	}
	b, err := os.ReadFile(path)
	if err != nil {
		if !explicit && errors.Is(err, fs.ErrNotExist) {
			return defaultConfig(), nil
		}
		return nil, usagef("config %s: %v", path, unwrapPathError(err))
	}
	c, err := parseConfig(path, b)
	if err != nil {
		return nil, err
	}
	c.SetDefaults()
	return c, nil
}

// defaultConfig is the config of a command run without a config file:
// every default, credentials from the SEPIPE_* variables.
func defaultConfig() *Config {
	c := &Config{lines: map[string]int{}}
	c.SetDefaults()
	return c
}

func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// parseConfig decodes the file b by yaml.v3's own strictness, a Decoder
// with KnownFields (unknown keys, keys given twice, values of the wrong
// kind), and words its errors as sepipe's (file, line, key: the wrong
// thing and what is wanted). By hand (ready, below) only what yaml.v3
// cannot do is done: the line of every key (Validate names them),
// ${VAR} expansion and its refusal of an unset variable, the warning of a
// literal secret, a scalar taken for a list of one, and a fraction
// refused for a whole number (yaml.v3 truncates 2.5 into 2).
func parseConfig(file string, b []byte) (*Config, error) {
	c := &Config{file: file, lines: map[string]int{}}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		line, msg := yamlErrorLine(err)
		return nil, usageError{&ConfigError{File: file, Line: line, Msg: "not valid YAML: " + msg}}
	}
	// One document: yaml.Unmarshal reads the first and drops the rest, so
	// settings after a "---" (two files joined, a ConfigMap of parts) were
	// ignored without a word (found by review).
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var first, second yaml.Node
	if err := dec.Decode(&first); err == nil {
		if err := dec.Decode(&second); err == nil {
			return nil, usageError{&ConfigError{File: file, Line: second.Line, Msg: "a second YAML document (after ---): the configuration is one document"}}
		}
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return c, nil // empty file
	}
	root := doc.Content[0]
	r := &ready{c: c, done: map[*yaml.Node]bool{}}
	r.walk(root, reflect.TypeFor[Config](), "")
	var faults []*ConfigError
	// Unknown keys, by yaml.v3's KnownFields. A yaml.Node has no such
	// option: the file is decoded a first time for them alone (its
	// values, not yet expanded, are not kept).
	strict := yaml.NewDecoder(bytes.NewReader(b))
	strict.KnownFields(true)
	if err := strict.Decode(new(Config)); err != nil {
		for _, f := range r.faults(err) {
			if strings.HasPrefix(f.Msg, "unknown key") {
				faults = append(faults, f)
			}
		}
	}
	faults = append(faults, r.errs...)
	// The values, expanded, and the rest of yaml.v3's checks: keys given
	// twice, kinds, the custom types' own (a bad duration).
	if err := root.Decode(c); err != nil {
		faults = append(faults, r.faults(err)...)
	}
	if len(faults) > 0 {
		slices.SortStableFunc(faults, func(a, b *ConfigError) int { return a.Line - b.Line })
		return nil, usageError{faults[0]}
	}
	return c, nil
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func yamlErrorLine(err error) (int, string) {
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n, m[2]
	}
	return 0, strings.TrimPrefix(err.Error(), "yaml: ")
}

// nodeError is what the custom types' UnmarshalYAML return: parseConfig
// names the key of the node.
type nodeError struct {
	node *yaml.Node
	msg  string
}

func (e *nodeError) Error() string { return fmt.Sprintf("line %d: %s", e.node.Line, e.msg) }

// UnmarshalYAML reads a duration such as 90m, 6h or 7d.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return &nodeError{n, "want a duration such as 90m, 6h or 7d, got " + kindName(n)}
	}
	dur, err := ParseDuration(n.Value)
	if err != nil {
		return &nodeError{n, err.Error()}
	}
	*d = Duration(dur)
	return nil
}

// UnmarshalYAML keeps the reference as written and expands it; an unset
// variable leaves the value empty (the commands that need it say so).
func (s *Secret) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return &nodeError{n, "want a ${ENV_VAR} reference, got " + kindName(n)}
	}
	*s = Secret{Ref: n.Value, Value: extract.Secret(expandEnv(n.Value))}
	return nil
}

var (
	durationType = reflect.TypeFor[Duration]()
	secretType   = reflect.TypeFor[Secret]()
	envRef       = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)
)

func isEnvRef(s string) bool {
	m := envRef.FindStringIndex(s)
	return m != nil && m[0] == 0 && m[1] == len(s)
}

func expandEnv(s string) string {
	return envRef.ReplaceAllStringFunc(s, func(m string) string { return os.Getenv(m[2 : len(m)-1]) })
}

// ready readies the document for yaml.v3, doing by hand only what yaml.v3
// cannot, with the config's types in hand (which value is a credential,
// a number, a list):
//   - the line of every key path, for the messages of Validate and of
//     yaml.v3's own errors (which give a line, never the key);
//   - ${VAR} expansion of every value but a credential's (Secret expands
//     its own and keeps the reference) and a filter value that is a
//     number; an unset variable is an error naming the key and the
//     variable, never an empty string (${DATA}/sepipe must not become
//     /sepipe); a value is read as a number where a number is wanted,
//     quoted or a reference ("100", ${N});
//   - the warning of a literal secret, naming its line;
//   - "include: course" read as a list of one;
//   - a fraction refused for a whole number (yaml.v3 truncates 2.5 to 2).
//
// A key it does not know or a value of the wrong kind it leaves to
// yaml.v3, which refuses them.
type ready struct {
	c     *Config
	done  map[*yaml.Node]bool // scalars already expanded (an alias visits its anchor again)
	nodes []placed            // every key and value, where it is
	errs  []*ConfigError
}

// placed is a node of the document and its key path.
type placed struct {
	node *yaml.Node
	path string
	key  bool // the node is a mapping key
}

func (r *ready) fail(n *yaml.Node, key, format string, a ...any) {
	r.errs = append(r.errs, &ConfigError{File: r.c.file, Line: n.Line, Key: key, Msg: fmt.Sprintf(format, a...)})
}

// expand expands the ${VAR} references of n in place; it reports whether
// there were any.
func (r *ready) expand(n *yaml.Node, path string) bool {
	if r.done[n] {
		return false
	}
	r.done[n] = true
	refs := envRef.FindAllStringSubmatch(n.Value, -1)
	for _, m := range refs {
		if _, ok := os.LookupEnv(m[1]); !ok {
			r.fail(n, path, "${%s} is not set (export it, or write the value)", m[1])
			return false
		}
	}
	n.Value = expandEnv(n.Value)
	return len(refs) > 0
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	return fmt.Sprintf("%q", n.Value)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// yamlKeys lists the keys of a config struct, in field order, and
// whether it has an inline map that takes the other keys.
func yamlKeys(t reflect.Type) (keys []string, fields map[string]reflect.Type, inline bool) {
	fields = map[string]reflect.Type{}
	for f := range t.Fields() {
		tag, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if tag == "" && opts == "inline" && f.Type.Kind() == reflect.Map {
			inline = true
			continue
		}
		if tag == "" || tag == "-" {
			continue
		}
		keys = append(keys, tag)
		fields[tag] = f.Type
	}
	return keys, fields, inline
}

func (r *ready) walk(n *yaml.Node, t reflect.Type, path string) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if path != "" {
		if _, ok := r.c.lines[path]; !ok {
			r.c.lines[path] = n.Line
		}
	}
	r.nodes = append(r.nodes, placed{node: n, path: path})
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return // key: (nothing) leaves the default
	}
	switch t {
	case durationType:
		if n.Kind == yaml.ScalarNode {
			n.Tag = "!!str"
			r.expand(n, path)
		}
		return
	case secretType:
		if n.Kind == yaml.ScalarNode && !strings.Contains(n.Value, "${") && n.Value != "" && !r.done[n] {
			r.c.warns = append(r.c.warns, fmt.Sprintf("%s:%d: %s holds a literal secret; write a ${ENV_VAR} reference instead and keep the value out of the file", r.c.file, n.Line, path))
		}
		r.done[n] = true
		return
	}
	switch t.Kind() {
	case reflect.Pointer: // an optional block or value
		r.walk(n, t.Elem(), path)
	case reflect.Struct, reflect.Map:
		if n.Kind != yaml.MappingNode {
			return // yaml.v3 says what it wants
		}
		var fields map[string]reflect.Type
		if t.Kind() == reflect.Struct {
			_, fields, _ = yamlKeys(t)
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			key := join(path, k.Value)
			r.nodes = append(r.nodes, placed{node: k, path: key, key: true})
			if _, ok := r.c.lines[key]; !ok {
				r.c.lines[key] = k.Line
			}
			var vt reflect.Type
			if t.Kind() == reflect.Map {
				vt = t.Elem() // a map: any key
			} else {
				vt = fields[k.Value]
			}
			if vt == nil {
				// Unknown: yaml.v3 refuses it, or (inline) an inline map
				// keeps it as written for the struct's Validate, which
				// names it (a credential by what it is).
				continue
			}
			r.walk(v, vt, key)
		}
	case reflect.Slice:
		if n.Kind == yaml.ScalarNode && t.Elem().Kind() == reflect.String {
			// include: course  is a list of one.
			e := *n
			*n = yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Line: e.Line, Column: e.Column, Content: []*yaml.Node{&e}}
		}
		if n.Kind != yaml.SequenceNode {
			return
		}
		for i, e := range n.Content {
			key := fmt.Sprintf("%s[%d]", path, i)
			if _, ok := r.c.lines[key]; !ok {
				r.c.lines[key] = e.Line
			}
			r.walk(e, t.Elem(), key)
		}
	case reflect.Interface: // a filter value: a string is expanded, a number stays one
		if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
			n.Tag = "!!str"
			r.expand(n, path)
		}
	case reflect.String:
		if n.Kind == yaml.ScalarNode {
			n.Tag = "!!str"
			r.expand(n, path)
		}
	case reflect.Int, reflect.Float64, reflect.Bool:
		if n.Kind != yaml.ScalarNode {
			return
		}
		raw := n.Value
		r.expand(n, path)
		n.Tag, n.Style = "", 0 // "100" and ${N} are numbers too
		if t.Kind() == reflect.Int && n.ShortTag() == "!!float" {
			r.fail(n, path, "want a whole number, got %q", raw) // yaml.v3 would truncate it
		}
	}
}

// Errors of yaml.v3's decoding.
var (
	yamlUnknown = regexp.MustCompile(`^line (\d+): field (.+) not found in type (.+)$`)
	yamlTwice   = regexp.MustCompile(`^line (\d+): mapping key "(.*)" already defined at line \d+$`)
	yamlKind    = regexp.MustCompile("^line (\\d+): cannot unmarshal (!!\\w+)(?: `(.*)`)? into (.+)$")
)

// faults words yaml.v3's errors of decoding the document as sepipe's:
// each at its file, line and key (the key written on that line), saying
// what was wrong and what is wanted.
func (r *ready) faults(err error) []*ConfigError {
	var ne *nodeError
	if errors.As(err, &ne) {
		return []*ConfigError{{File: r.c.file, Line: ne.node.Line, Key: r.pathOf(ne.node.Line, "", false), Msg: ne.msg}}
	}
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return []*ConfigError{{File: r.c.file, Msg: err.Error()}}
	}
	var out []*ConfigError
	for _, e := range te.Errors {
		f := &ConfigError{File: r.c.file, Msg: e}
		line := func(s string) int { n, _ := strconv.Atoi(s); return n }
		switch {
		case yamlUnknown.MatchString(e):
			m := yamlUnknown.FindStringSubmatch(e)
			f.Line = line(m[1])
			f.Key = r.pathOf(f.Line, m[2], true)
			f.Msg = fmt.Sprintf("unknown key %q (want %s)", m[2], strings.Join(wantedKeys(m[3]), ", "))
		case yamlTwice.MatchString(e):
			m := yamlTwice.FindStringSubmatch(e)
			f.Line = line(m[1])
			f.Key = r.pathOf(f.Line, m[2], true)
			f.Msg = "given twice"
		case yamlKind.MatchString(e):
			m := yamlKind.FindStringSubmatch(e)
			f.Line = line(m[1])
			f.Key = r.pathOf(f.Line, m[3], false)
			got := map[string]string{"!!map": "a mapping", "!!seq": "a list"}[m[2]]
			if got == "" {
				got = strconv.Quote(m[3])
			}
			f.Msg = "want " + wantedKind(m[4]) + ", got " + got
		}
		out = append(out, f)
	}
	return out
}

// pathOf is the key path of what is written on line: the key named name
// (a key), or the value written as value, or else the last thing there.
func (r *ready) pathOf(line int, name string, key bool) string {
	found := ""
	for _, p := range r.nodes {
		if p.node.Line != line || p.key != key {
			continue
		}
		if name != "" && p.node.Value == name {
			return p.path
		}
		found = p.path
	}
	return found
}

// wantedKind says what a value of Go type goType (as yaml.v3 names it)
// is, for a message.
func wantedKind(goType string) string {
	switch {
	case goType == "int" || goType == "*int":
		return "a whole number"
	case goType == "float64":
		return "a number"
	case goType == "bool" || goType == "*bool":
		return "true or false"
	case goType == "string":
		return "a single value"
	case strings.HasPrefix(goType, "[]"):
		return "a list"
	case strings.HasPrefix(goType, "map["):
		return "a mapping"
	}
	return "a mapping of keys"
}

// wantedKeys lists the keys of the config struct yaml.v3 names typeName
// (main.ServiceConfig, lakehouse.CatalogConfig, ...).
func wantedKeys(typeName string) []string {
	var keys []string
	seen := map[reflect.Type]bool{}
	var find func(t reflect.Type)
	find = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t] {
			return
		}
		seen[t] = true
		if t.String() == typeName {
			keys, _, _ = yamlKeys(t)
			return
		}
		for f := range t.Fields() {
			find(f.Type)
		}
	}
	find(reflect.TypeFor[Config]())
	return keys
}

// Defaults.
const (
	defaultOut         = "./sepipe-data"
	defaultAccessEnv   = "SEPIPE_ACCESS_TOKEN"
	defaultAPITokenEnv = "SEPIPE_API_TOKEN"
	defaultClientIDEnv = "SEPIPE_OAUTH_CLIENT_ID"
	defaultSecretEnv   = "SEPIPE_OAUTH_CLIENT_SECRET"
	defaultRefreshEnv  = "SEPIPE_REFRESH_TOKEN"
)

// SetDefaults fills what the file leaves out. Credentials default to the
// environment variables SEPIPE_ACCESS_TOKEN and SEPIPE_API_TOKEN.
func (c *Config) SetDefaults() {
	c.defaultSecrets()
	r := &c.Requests
	if r.Concurrency == 0 {
		r.Concurrency = extract.DefaultConcurrency
	}
	if r.ObjectConcurrency == 0 {
		r.ObjectConcurrency = 2
	}
	if r.Rate == 0 {
		r.Rate = extract.DefaultRateLimit // no ceiling: the client finds the service's rate
	}
	if r.Burst == 0 {
		r.Burst = extract.DefaultBurst // automatic
	}
	if r.PageSize == 0 {
		r.PageSize = extract.DefaultPageSize
	}
	if r.MaxAttempts == 0 {
		r.MaxAttempts = extract.DefaultMaxAttempts
	}
	if r.MaxWait == 0 {
		r.MaxWait = Duration(extract.DefaultMaxWait)
	}
	if r.Timeout == 0 {
		r.Timeout = Duration(extract.DefaultTimeout)
	}
	if r.MaxResponseBytes == 0 {
		r.MaxResponseBytes = extract.DefaultMaxResponseBytes
	}
	if c.Output.Dir == "" {
		c.Output.Dir = defaultOut
	}
	if c.Output.Lake.Iceberg != nil {
		c.Output.Lake.Iceberg.SetDefaults()
	}
	if c.Log.Level == "" {
		c.Log.Level = "info"
	}
	if c.Log.Format == "" {
		c.Log.Format = "text"
	}
	if c.Schedule.TimeZone == "" {
		c.Schedule.TimeZone = "Local"
	}
	if c.Schedule.Retries == nil {
		n := defaultRetries
		c.Schedule.Retries = &n
	}
	if c.lines == nil {
		c.lines = map[string]int{}
	}
	// Only an absent retry_delay takes the default: a written 0s is
	// refused (at least 1s), as --retry-delay 0s is, not 10 minutes.
	if _, set := c.lines["schedule.retry_delay"]; c.Schedule.RetryDelay == 0 && !set {
		c.Schedule.RetryDelay = Duration(defaultRetryDelay)
	}
}

// defaultSecrets points the credentials the file leaves out at their
// environment variables.
func (c *Config) defaultSecrets() {
	envSecret := func(s *Secret, env string) {
		if s.Ref == "" {
			*s = Secret{Ref: "${" + env + "}", Value: extract.Secret(os.Getenv(env))}
		}
	}
	envSecret(&c.Credentials.AccessToken, defaultAccessEnv)
	envSecret(&c.Credentials.APIToken, defaultAPITokenEnv)
	envSecret(&c.Service.OAuth.ClientID, defaultClientIDEnv)
	envSecret(&c.Service.OAuth.ClientSecret, defaultSecretEnv)
	envSecret(&c.Service.OAuth.RefreshToken, defaultRefreshEnv)
}

// tenantName is what a tenant may be called: it names a folder and, in an
// Iceberg catalog, a namespace.
var tenantName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// tenantBlocks are the top-level keys a tenant's block replaces.
var tenantBlocks = []string{"service", "credentials", "legacy"}

// validateTenants checks the tenants block of a config that has one:
// names that can name a folder and a namespace, no top-level block a
// tenant's replaces, no namespace of the config's own.
func (c *Config) validateTenants() error {
	for _, k := range sortedKeys(c.Tenants) {
		if !tenantName.MatchString(k) {
			return c.errf("tenants."+k, "a tenant's name is lower-case letters, digits, - and _ (it names a folder), got %q", k)
		}
	}
	for _, b := range tenantBlocks {
		if _, ok := c.lines[b]; ok {
			return c.errf(b, "with tenants, each tenant has its own %s (tenants.NAME.%s), not the top level", b, b)
		}
	}
	if _, ok := c.lines["output.lake.iceberg.namespace"]; ok {
		return c.errf("output.lake.iceberg.namespace", "with tenants, each tenant's tables are in a namespace named after it: leave namespace out")
	}
	return nil
}

// UseTenant makes c the config of tenant name: its service, credentials
// and legacy login take the top level's place, and its output folder is
// <output.dir>/<name> (TenantDir). name "" is right only for a config
// without tenants; a config with tenants needs one named.
func (c *Config) UseTenant(name string) error {
	if len(c.Tenants) == 0 {
		if name != "" {
			return usagef("--tenant %s: the config lists no tenants (add a tenants: block, or leave --tenant out)", name)
		}
		return nil
	}
	if err := c.validateTenants(); err != nil {
		return err
	}
	names := strings.Join(sortedKeys(c.Tenants), ", ")
	if name == "" {
		return usagef("the config lists tenants (%s): choose one with --tenant", names)
	}
	t, ok := c.Tenants[name]
	if !ok {
		return usagef("--tenant %q: the config's tenants are %s", name, names)
	}
	c.Service, c.Credentials, c.Legacy = t.Service, t.Credentials, t.Legacy
	c.tenant = name
	c.defaultSecrets()
	c.Output.Dir = c.TenantDir(c.Output.Dir)
	if ic := c.Output.Lake.Iceberg; ic != nil {
		ic.Namespace = name // <tenant>.<stream> in the shared catalog
	}
	return nil
}

// folderOf resolves the output folder of a command that works on an
// output folder only (listen, dashboard, publish, query): with tenant, that
// tenant's folder under out (when given) or output.dir; without, out (when
// given, or when there is no config file: the command's own default) as it
// is, or output.dir of a config without tenants.
func (c *Config) folderOf(tenant, out string, outGiven bool) (string, error) {
	if tenant == "" && (outGiven || c.file == "") {
		return out, nil
	}
	if err := c.UseTenant(tenant); err != nil {
		return "", err
	}
	if outGiven {
		return c.TenantDir(out), nil
	}
	return c.Output.Dir, nil // SetDefaults gave it one; UseTenant made it the tenant's
}

// TenantDir is the output folder of the chosen tenant under base (base
// itself without tenants).
func (c *Config) TenantDir(base string) string {
	if c.tenant == "" {
		return base
	}
	return filepath.Join(base, c.tenant)
}

// tenantKey names a key of the chosen tenant's blocks by its place in the
// file (tenants.acme.service.tenant_url).
func (c *Config) tenantKey(key string) string {
	if c.tenant == "" {
		return key
	}
	for _, b := range tenantBlocks {
		if key == b || strings.HasPrefix(key, b+".") {
			return "tenants." + c.tenant + "." + key
		}
	}
	return key
}

// Validate checks the config without the network. Filters are checked
// against the live describe at run time (checkFilters).
func (c *Config) Validate() error {
	if c.Service.TenantURL == "" {
		return c.errf("service.tenant_url", "is required (the tenant's URL, e.g. https://acme.example.com)")
	}
	if err := load.CheckOutputPath(c.Output.Dir); err != nil {
		return c.errf("output.dir", "%v", err)
	}
	if c.Output.MaxValueBytes < 0 {
		return c.errf("output.max_value_bytes", "want at least 1 byte (or 0 for the default), got %d", c.Output.MaxValueBytes)
	}
	if err := c.validateLake(); err != nil {
		return err
	}
	for key, u := range map[string]string{
		"service.tenant_url": c.Service.TenantURL, "service.legacy_url": c.Service.LegacyURL,
		"service.v4_url": c.Service.V4URL, "service.webhooks_url": c.Service.WebhooksURL,
	} {
		if u == "" {
			continue
		}
		if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return c.errf(key, "%q is not an absolute http or https URL", u)
		}
	}
	if o := c.Service.OAuth; o.ClientID.Set() != o.ClientSecret.Set() {
		key := "service.oauth.client_secret"
		if !o.ClientID.Set() {
			key = "service.oauth.client_id"
		}
		return c.errf(key, "service.oauth.client_id and client_secret go together (%s is not set)", c.secretRef(key))
	}
	if o := c.Service.OAuth; o.RefreshToken.Set() && !o.ClientID.Set() {
		return c.errf("service.oauth.client_id", "a refresh token (%s) needs the OAuth client id and secret", o.RefreshToken.String())
	}
	if u := c.Service.OAuth.TokenURL; u != "" {
		if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return c.errf("service.oauth.token_url", "%q is not an absolute http or https URL", u)
		}
	}
	if c.Legacy.LoginDir == "" && (c.Legacy.Username != "" || c.Legacy.Password.Ref != "") {
		return c.errf("legacy.login_dir", "is required with legacy.username and legacy.password")
	}
	if (c.Legacy.Username == "") != (c.Legacy.Password.Ref == "") {
		return c.errf("legacy.password", "legacy.username and legacy.password go together")
	}
	if len(c.Include) > 0 && len(c.Exclude) > 0 {
		return c.errf("exclude", "give include or exclude, not both")
	}
	for _, list := range []struct {
		key string
		ids []string
	}{{"include", c.Include}, {"exclude", c.Exclude}} {
		for i, id := range list.ids {
			if id == "" {
				return c.errf(fmt.Sprintf("%s[%d]", list.key, i), "empty object id")
			}
		}
	}
	for _, id := range sortedKeys(c.Streams) {
		if err := c.Streams[id].pipeline().Validate(id); err != nil {
			return c.streamErr(id, err)
		}
	}
	r := c.Requests
	switch {
	case r.Concurrency < 1:
		return c.errf("requests.concurrency", "want at least 1, got %d", r.Concurrency)
	case r.ObjectConcurrency < 1:
		return c.errf("requests.object_concurrency", "want at least 1, got %d", r.ObjectConcurrency)
	case r.Rate < 0:
		return c.errf("requests.rate", "want a ceiling of requests per second >= 0 (0: none, the rate adapts to the service), got %v", r.Rate)
	case r.Burst < 0:
		return c.errf("requests.burst", "want at least 1 (or 0: automatic), got %d", r.Burst)
	case r.PageSize < 1 || r.PageSize > 1000:
		return c.errf("requests.page_size", "want 1 to 1000 rows, got %d", r.PageSize)
	case r.MaxAttempts < 1:
		return c.errf("requests.max_attempts", "want at least 1, got %d", r.MaxAttempts)
	case r.MaxResponseBytes < 1:
		return c.errf("requests.max_response_bytes", "want at least 1 byte, got %d", r.MaxResponseBytes)
	case r.MaxBytesInFlight < 0:
		return c.errf("requests.max_bytes_in_flight", "want at least 1 byte (or 0 for the default), got %d", r.MaxBytesInFlight)
	case r.MaxPages < 0:
		return c.errf("requests.max_pages", "want at least 1 page (or 0 for the default), got %d", r.MaxPages)
	}
	if _, err := parseLevel(c.Log.Level); err != nil {
		return c.errf("log.level", "%q: want debug, info, warn or error", c.Log.Level)
	}
	if c.Log.Format != "text" && c.Log.Format != "json" {
		return c.errf("log.format", "%q: want text or json", c.Log.Format)
	}
	if _, err := time.LoadLocation(c.Schedule.TimeZone); err != nil {
		return c.errf("schedule.time_zone", "unknown time zone %q (want an IANA name such as Europe/Berlin, UTC or Local)", c.Schedule.TimeZone)
	}
	if c.Schedule.Cron != "" {
		if _, err := parseCron(c.Schedule.Cron); err != nil {
			return c.errf("schedule.cron", "%v", err)
		}
	}
	if n := *c.Schedule.Retries; n < 0 || n > maxRetries {
		return c.errf("schedule.retries", "want 0 to %d, got %d", maxRetries, n)
	}
	if d := time.Duration(c.Schedule.RetryDelay); d < time.Second {
		return c.errf("schedule.retry_delay", "want at least 1s, got %v", d)
	}
	return nil
}

// Defaults and bounds of schedule.retries and schedule.retry_delay: two
// more tries of a failed night, 10 and 20 minutes after it failed.
const (
	defaultRetries    = 2
	maxRetries        = 10
	defaultRetryDelay = 10 * time.Minute
)

// validateLake checks output.lake.iceberg, when given, by the library's
// rules (lakehouse.Config.Validate); its key becomes the file's key path
// and line.
func (c *Config) validateLake() error {
	ic := c.Output.Lake.Iceberg
	if ic == nil {
		return nil
	}
	if err := ic.Validate(); err != nil {
		var ce *lakehouse.ConfigError
		if errors.As(err, &ce) {
			return c.errf("output.lake.iceberg."+ce.Key, "%v", ce.Err)
		}
		return c.errf("output.lake.iceberg", "%v", err)
	}
	return nil
}

// Warning keeps the literal-secret messages in one place for the commands.
func (c *Config) warnTo(warn func(string)) {
	for _, w := range c.warns {
		warn(w)
	}
}

func sortedKeys[M ~map[string]V, V any](m M) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// cronParser accepts five fields (minute first) or six (seconds first),
// descriptors such as @daily and @every 1h, and a CRON_TZ= prefix.
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// parseCron parses a schedule's expression; one with fixed hours runs once
// on each matching local time, daylight-saving changes included (wallClock).
func parseCron(spec string) (cron.Schedule, error) {
	s, err := cronParser.Parse(spec)
	if err != nil {
		return nil, fmt.Errorf("bad cron expression %q: %v (want 5 fields \"min hour day month weekday\", 6 with seconds first, or @daily, @hourly, @every 1h)", spec, err)
	}
	return wallClock(s), nil
}

// streams converts the stream configs for pipeline.Sync.
func (c *Config) streams() map[string]pipeline.StreamConfig {
	out := make(map[string]pipeline.StreamConfig, len(c.Streams))
	for id, s := range c.Streams {
		ps := s.pipeline()
		ps.Mode, _ = load.ParseWriteMode(s.Mode)
		ps.Contract, _ = schemas.ParseContract(s.Contract)
		out[id] = ps
	}
	return out
}

// pipeline is s as pipeline.Sync takes it, mode and contract as written.
func (s StreamConfig) pipeline() pipeline.StreamConfig {
	ps := pipeline.StreamConfig{
		Mode: load.WriteMode(s.Mode), PrimaryKey: s.PrimaryKey, Cursor: s.Cursor,
		Lookback: time.Duration(s.Lookback), Contract: schemas.Contract(s.Contract),
	}
	for _, f := range s.Filters {
		ps.Filters = append(ps.Filters, extract.Filter{Field: f.Field, Operator: f.Operator, Values: f.Values})
	}
	return ps
}

// streamErr names the key of a stream's fault found by
// pipeline.StreamConfig.Validate or pipeline.CheckStream.
func (c *Config) streamErr(id string, err error) error {
	key := "streams." + id
	var se *pipeline.StreamConfigError
	if !errors.As(err, &se) {
		return c.errf(key, "%v", err)
	}
	var fe *extract.FilterError
	if se.Field == "Filters" && errors.As(se.Err, &fe) {
		return c.errf(fmt.Sprintf("%s.filters[%d].%s", key, se.Filter, fe.Part), "%s", fe.Reason)
	}
	if se.Field == "Filters" { // against the describe (pipeline.CheckStream)
		return c.errf(fmt.Sprintf("%s.filters[%d]", key, se.Filter), "bad filter: %v", se.Err)
	}
	if field, ok := map[string]string{"Mode": "mode", "PrimaryKey": "primary_key", "Cursor": "cursor", "Lookback": "lookback", "Contract": "contract"}[se.Field]; ok {
		key += "." + field
	}
	return c.errf(key, "%v", se.Err)
}

// clientOptions are the extract options the config asks for.
func (c *Config) clientOptions() []extract.Option {
	r := c.Requests
	opts := []extract.Option{
		extract.WithConcurrency(r.Concurrency),
		extract.WithRateLimit(r.Rate, r.Burst),
		extract.WithPageSize(r.PageSize),
		extract.WithRetry(r.MaxAttempts, time.Duration(r.MaxWait)),
		extract.WithTimeout(time.Duration(r.Timeout)),
		extract.WithMaxResponseBytes(int64(r.MaxResponseBytes)),
		extract.WithSpillFiles(load.Lake{Root: c.Output.Dir}.CreateScratch),
	}
	if r.MaxBytesInFlight > 0 {
		opts = append(opts, extract.WithMaxBytesInFlight(int64(r.MaxBytesInFlight)))
	}
	if r.MaxPages > 0 {
		opts = append(opts, extract.WithMaxPages(r.MaxPages))
	}
	if c.Credentials.AccessToken.Set() {
		opts = append(opts, extract.WithAccessToken(c.Credentials.AccessToken.Value.Reveal()))
	}
	if c.Credentials.APIToken.Set() {
		opts = append(opts, extract.WithAPIToken(c.Credentials.APIToken.Value.Reveal()))
	}
	if c.Service.LegacyURL != "" {
		opts = append(opts, extract.WithLegacyURL(c.Service.LegacyURL))
	}
	if c.Service.V4URL != "" {
		opts = append(opts, extract.WithV4URL(c.Service.V4URL))
	}
	if c.Service.WebhooksURL != "" {
		opts = append(opts, extract.WithWebhookURL(c.Service.WebhooksURL))
	}
	return opts
}

// secretMissing explains an unset credential: which reference, where.
func (c *Config) secretMissing(key string, s Secret) error {
	if c.file == "" || c.line(key) == 0 {
		name := strings.TrimSuffix(strings.TrimPrefix(s.Ref, "${"), "}")
		return usagef("%s is not set: export the tenant's %s first", name, secretWhat(key))
	}
	return c.errf(key, "%s is not set: export it first", s.String())
}

// secretRef names the reference of a secret key, for messages.
func (c *Config) secretRef(key string) string {
	o := c.Service.OAuth
	switch key {
	case "service.oauth.client_id":
		return o.ClientID.String()
	case "service.oauth.client_secret":
		return o.ClientSecret.String()
	case "service.oauth.refresh_token":
		return o.RefreshToken.String()
	}
	return key
}

// webhookSecrets returns the signing secrets of webhooks.secrets; an
// entry that is empty or whose variable is not set is an error naming it,
// never a silent drop.
func (c *Config) webhookSecrets() ([]string, error) {
	var out []string
	for i, sec := range c.Webhooks.Secrets {
		key := fmt.Sprintf("webhooks.secrets[%d]", i)
		switch {
		case sec.Ref == "":
			return nil, c.errf(key, "empty signing secret")
		case !sec.Set():
			return nil, c.errf(key, "%s is not set: export it, or remove the entry", sec)
		}
		out = append(out, sec.Value.Reveal())
	}
	return out, nil
}

// minCredentialLen: shorter credentials are refused at start; they could
// not be told apart from ordinary text when scrubbing messages.
const minCredentialLen = 8

// checkCredentialLengths refuses a set credential shorter than
// minCredentialLen, naming where it comes from.
func (c *Config) checkCredentialLengths() error {
	for _, s := range []struct {
		key string
		v   Secret
	}{
		{"credentials.access_token", c.Credentials.AccessToken}, {"credentials.api_token", c.Credentials.APIToken},
		{"service.oauth.client_secret", c.Service.OAuth.ClientSecret}, {"service.oauth.refresh_token", c.Service.OAuth.RefreshToken},
	} {
		if s.v.Set() && len(s.v.Value) < minCredentialLen {
			if c.file == "" || c.line(s.key) == 0 {
				return usagef("%s is %d characters long; credentials shorter than %d are refused (is it the right value?)", s.v, len(s.v.Value), minCredentialLen)
			}
			return c.errf(s.key, "%s is %d characters long; credentials shorter than %d are refused (is it the right value?)", s.v, len(s.v.Value), minCredentialLen)
		}
	}
	return nil
}

// oauthClient reports whether the OAuth client (id and secret) is
// configured: the access token is then refreshed.
func (c *Config) oauthClient() bool {
	return c.Service.OAuth.ClientID.Set() && c.Service.OAuth.ClientSecret.Set()
}

// tokenStore is the OAuth token store of the output folder.
func (c *Config) tokenStore() *extract.FileTokenStore {
	return &extract.FileTokenStore{Path: filepath.Join(c.Output.Dir, ".sepipe", "token.json")}
}

// newOAuth builds the access token source of the config's OAuth client.
func (c *Config) newOAuth(log *slog.Logger) (*extract.OAuth, error) {
	o := c.Service.OAuth
	src, err := extract.NewOAuth(c.Service.TenantURL, extract.OAuthConfig{
		ClientID: o.ClientID.Value.Reveal(), ClientSecret: o.ClientSecret.Value.Reveal(),
		RefreshToken: o.RefreshToken.Value.Reveal(), TokenURL: o.TokenURL,
	}, c.tokenStore(), extract.WithOAuthLogger(log), extract.WithOAuthTimeout(time.Duration(c.Requests.Timeout)))
	if err != nil {
		return nil, c.errf("service.oauth", "%v", err)
	}
	return src, nil
}

func secretWhat(key string) string {
	switch key {
	case "credentials.access_token":
		return "OAuth access token"
	case "credentials.api_token":
		return "developer API token"
	}
	return "credential"
}
