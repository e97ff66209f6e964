package lakehouse

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	_ "github.com/apache/iceberg-go/catalog/rest" // registers the rest catalog type
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	icebergio "github.com/apache/iceberg-go/io"
	_ "github.com/apache/iceberg-go/io/gocloud/s3" // registers s3:// locations
	"github.com/apache/iceberg-go/table"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	_ "modernc.org/sqlite"             // database/sql driver "sqlite", pure Go
)

// Environment variables a REST catalog's credential is read from (never
// from the config file).
const (
	EnvRESTToken      = "SEPIPE_ICEBERG_REST_TOKEN"      // a bearer token
	EnvRESTCredential = "SEPIPE_ICEBERG_REST_CREDENTIAL" // client_id:client_secret for OAuth2
)

// Lakehouse is an Iceberg warehouse reached through one catalog: it
// creates and evolves one table per stream, stages a run's data files,
// commits them exactly once, and expires old snapshots. It is safe for
// concurrent use by several goroutines, each on its own tables or not.
type Lakehouse struct {
	cfg         Config
	cat         catalog.Catalog
	db          *sql.DB // the SQL catalog's database, owned
	mem         memory.Allocator
	rowsPerFile int64
	attempts    int
	retryWait   time.Duration

	// beforeCommit, if set, runs after a commit is planned and before it
	// is sent to the catalog (tests put a second writer there).
	beforeCommit func(ident table.Identifier, attempt int)
}

// Option configures a Lakehouse.
type Option func(*Lakehouse)

// WithAllocator sets the allocator used to convert and write batches.
func WithAllocator(mem memory.Allocator) Option { return func(l *Lakehouse) { l.mem = mem } }

// WithRowsPerFile sets how many rows go into one data file before the next
// is started (default 1,966,080).
func WithRowsPerFile(n int64) Option { return func(l *Lakehouse) { l.rowsPerFile = max(n, 1) } }

// WithCommitAttempts sets how many times a commit is planned and sent
// when other writers keep committing first (default 8).
func WithCommitAttempts(n int) Option { return func(l *Lakehouse) { l.attempts = max(n, 1) } }

// Open connects to the catalog cfg names. It applies cfg's defaults,
// validates it, and for a SQL catalog creates the catalog's tables if the
// database has none. Close releases the connection.
func Open(ctx context.Context, cfg Config, opts ...Option) (*Lakehouse, error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	l := &Lakehouse{cfg: cfg, mem: memory.DefaultAllocator, rowsPerFile: 16 * 122_880, attempts: 8,
		retryWait: 50 * time.Millisecond}
	for _, o := range opts {
		o(l)
	}
	props := cfg.catalogProperties()
	fail := func(err error) (*Lakehouse, error) {
		return nil, &TableError{Table: cfg.Namespace, Step: "open " + cfg.Catalog.Type + " catalog " + cfg.Catalog.Name, Err: err}
	}
	switch cfg.Catalog.Type {
	case CatalogSQL:
		var (
			driver, dsn string
			dialect     sqlcat.SupportedDialect
		)
		switch cfg.Catalog.Driver {
		case DriverSQLite:
			if err := os.MkdirAll(filepath.Dir(cfg.Catalog.URI), 0o755); err != nil {
				return fail(err)
			}
			// WAL and a busy timeout let several connections (and
			// processes) share the file; BEGIN IMMEDIATE takes the write
			// lock up front, so a writer waits instead of failing midway.
			driver, dialect = "sqlite", sqlcat.SQLite
			name, err := sqliteFileURI(cfg.Catalog.URI)
			if err != nil {
				return fail(fmt.Errorf("catalog.uri %q: %w", cfg.Catalog.URI, err))
			}
			dsn = name + "?_pragma=busy_timeout(30000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate"
		case DriverPostgres:
			driver, dialect, dsn = "pgx", sqlcat.Postgres, cfg.Catalog.URI
		}
		db, err := sql.Open(driver, dsn)
		if err != nil {
			return fail(err)
		}
		if err := db.PingContext(ctx); err != nil {
			db.Close()
			return fail(err)
		}
		var cat *sqlcat.Catalog
		for try := 0; ; try++ {
			// Two processes creating the catalog's tables at once can
			// collide in PostgreSQL's own catalog; the loser retries.
			cat, err = sqlcat.NewCatalog(cfg.Catalog.Name, db, dialect, props)
			if err == nil || try == 2 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			db.Close()
			return fail(err)
		}
		l.cat, l.db = cat, db
	case CatalogREST:
		props["type"] = CatalogREST
		props["uri"] = cfg.Catalog.URI
		if v := os.Getenv(EnvRESTToken); v != "" {
			props["token"] = v
		}
		if v := os.Getenv(EnvRESTCredential); v != "" {
			props["credential"] = v
		}
		cat, err := catalog.Load(ctx, cfg.Catalog.Name, props)
		if err != nil {
			return fail(err)
		}
		l.cat = cat
	}
	return l, nil
}

// catalogProperties are the properties the catalog and its tables' file
// IO get: the warehouse, S3 endpoint, region and addressing, and the
// user's extra properties. No credential is ever among them.
func (c Config) catalogProperties() iceberg.Properties {
	p := iceberg.Properties{}
	for k, v := range c.Properties {
		p[k] = v
	}
	if c.Warehouse != "" {
		p["warehouse"] = strings.TrimRight(c.Warehouse, "/")
	}
	if c.Catalog.Type == CatalogSQL {
		p["init_catalog_tables"] = "true"
	}
	if c.S3.Endpoint != "" {
		p[icebergio.S3EndpointURL] = c.S3.Endpoint
	}
	if c.S3.Region != "" {
		p[icebergio.S3Region] = c.S3.Region
	}
	if c.S3.PathStyle != nil {
		p[icebergio.S3ForceVirtualAddressing] = strconv.FormatBool(!*c.S3.PathStyle)
	}
	return p
}

// CheckWarehouse writes a small object under the warehouse and removes
// it again, so that a missing bucket, a wrong s3.endpoint or s3.region,
// or missing or wrong S3 credentials are reported at once, naming the
// warehouse, instead of by every stream's first write (the catalog alone
// can be reached with all of them wrong). A REST catalog's tables live
// where its server says, with the credentials it may vend: there it
// checks nothing.
func (l *Lakehouse) CheckWarehouse(ctx context.Context) error {
	if l.cfg.Catalog.Type != CatalogSQL {
		return nil
	}
	loc := strings.TrimRight(l.cfg.Warehouse, "/")
	fail := func(what string, err error) error { return &WarehouseError{Location: loc, What: what, Err: err} }
	fsys, err := icebergio.LoadFS(ctx, l.cfg.catalogProperties(), loc)
	if err != nil {
		return fail("cannot open it", err)
	}
	wfs, ok := fsys.(icebergio.WriteFileIO)
	if !ok {
		return fail("cannot write to it", errors.New("its file IO cannot write"))
	}
	probe := loc + "/.sepipe-probe-" + randomTag()
	if err := wfs.WriteFile(probe, []byte("sepipe\n")); err != nil {
		return fail("cannot write to it", err)
	}
	if err := wfs.Remove(probe); err != nil {
		return fail("cannot remove "+probe+" from it", err)
	}
	return nil
}

// Close releases the catalog and its database connection.
func (l *Lakehouse) Close() error {
	var errs []error
	if c, ok := l.cat.(catalog.Closer); ok {
		errs = append(errs, c.Close())
	}
	if l.db != nil {
		errs = append(errs, l.db.Close())
	}
	return errors.Join(errs...)
}

// Catalog is the iceberg-go catalog, for reading tables (scans, snapshot
// logs). Writes go through the Lakehouse's own methods.
func (l *Lakehouse) Catalog() catalog.Catalog { return l.cat }

// Config is the configuration in use, defaults applied.
func (l *Lakehouse) Config() Config { return l.cfg }

// Identifier is the table identifier of stream in namespace (the
// configured namespace when "").
func (l *Lakehouse) Identifier(namespace, stream string) table.Identifier {
	if namespace == "" {
		namespace = l.cfg.Namespace
	}
	return table.Identifier{namespace, stream}
}

// Tables lists the stream names of namespace's tables ("" for the
// configured namespace), sorted; a namespace no run has made yet has none.
func (l *Lakehouse) Tables(ctx context.Context, namespace string) ([]string, error) {
	ns := l.Identifier(namespace, "")[0]
	var out []string
	for ident, err := range l.cat.ListTables(ctx, table.Identifier{ns}) {
		if errors.Is(err, catalog.ErrNoSuchNamespace) {
			return nil, nil
		}
		if err != nil {
			return nil, &TableError{Table: ns, Step: "list tables", Err: err}
		}
		out = append(out, ident[len(ident)-1])
	}
	slices.Sort(out)
	return out, nil
}

// LoadTable loads stream's table in namespace ("" for the configured one).
func (l *Lakehouse) LoadTable(ctx context.Context, namespace, stream string) (*table.Table, error) {
	ident := l.Identifier(namespace, stream)
	t, err := l.cat.LoadTable(ctx, ident)
	if err != nil {
		return nil, &TableError{Table: identString(ident), Step: "load table", Err: err}
	}
	return t, nil
}

func identString(ident table.Identifier) string { return strings.Join(ident, ".") }

// ensureNamespace creates ns if it does not exist.
func (l *Lakehouse) ensureNamespace(ctx context.Context, ns string) error {
	ok, err := l.cat.CheckNamespaceExists(ctx, table.Identifier{ns})
	if err != nil {
		return err
	}
	if ok {
		return nil
	}
	err = l.cat.CreateNamespace(ctx, table.Identifier{ns}, iceberg.Properties{"owner": "sepipe"})
	if err != nil && !errors.Is(err, catalog.ErrNamespaceAlreadyExists) {
		return err
	}
	return nil
}

// sqliteFileURI is the file: URI of the SQLite catalog at path, a plain
// file path (catalog.uri). SQLite reads the URI's path percent-decoded
// and cut at '?' and '#': the raw path of a file named lake#1/catalog.db
// or 100%41.db opened another file (lake, 100A.db). The path, made
// absolute (no "//" authority either), is escaped, so the catalog is
// exactly the file named.
func sqliteFileURI(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	return "file:" + (&url.URL{Path: filepath.ToSlash(abs)}).EscapedPath(), nil
}

// ensureTable loads the table of spec or creates it: the stream's columns
// and sepipe's, partitioned by the day column (identity or day
// transform), sorted by the primary key when there is one, format v2.
func (l *Lakehouse) ensureTable(ctx context.Context, ident table.Identifier, spec TableSpec) (*table.Table, error) {
	name := identString(ident)
	t, err := l.cat.LoadTable(ctx, ident)
	if err == nil {
		return t, nil
	}
	if !errors.Is(err, catalog.ErrNoSuchTable) {
		return nil, &TableError{Table: name, Step: "load table", Err: err}
	}
	if err := l.ensureNamespace(ctx, ident[0]); err != nil {
		return nil, &TableError{Table: name, Step: "create namespace", Err: err}
	}
	dayCol := dayColumnFor(spec.Schema)
	cols, err := streamColumns(name, spec.Schema, dayCol)
	if err != nil {
		return nil, err
	}
	sc := newTableSchema(cols)
	dayField, _ := sc.FindFieldByName(dayCol)
	var pf iceberg.PartitionField
	switch l.cfg.Partition {
	case PartitionDay:
		pf = iceberg.PartitionField{SourceIDs: []int{dayField.ID}, FieldID: 1000, Name: dayPartitionFor(sc, dayCol), Transform: iceberg.DayTransform{}}
	default:
		pf = iceberg.PartitionField{SourceIDs: []int{dayField.ID}, FieldID: 1000, Name: dayCol, Transform: iceberg.IdentityTransform{}}
	}
	pspec := iceberg.NewPartitionSpec(pf)
	order := table.UnsortedSortOrder
	if len(spec.PrimaryKey) > 0 {
		var fields []table.SortField
		for _, k := range spec.PrimaryKey {
			f, ok := sc.FindFieldByName(k)
			if !ok {
				return nil, &TableError{Table: name, Step: "create table", Err: fmt.Errorf("primary key field %q is not a column", k)}
			}
			fields = append(fields, table.SortField{SourceIDs: []int{f.ID}, Transform: iceberg.IdentityTransform{},
				Direction: table.SortASC, NullOrder: table.NullsFirst})
		}
		if order, err = table.NewSortOrder(1, fields); err != nil {
			return nil, &TableError{Table: name, Step: "create table: sort order", Err: err}
		}
	}
	props := iceberg.Properties{
		"format-version":                  "2",
		"write.format.default":            "parquet",
		"write.parquet.compression-codec": "zstd",
		propDayColumn:                     dayCol,
		propObject:                        spec.Stream,
	}
	if len(spec.PrimaryKey) > 0 {
		b, _ := json.Marshal(spec.PrimaryKey)
		props[propKey] = string(b)
	}
	t, err = l.cat.CreateTable(ctx, ident, sc, catalog.WithPartitionSpec(&pspec), catalog.WithSortOrder(order),
		catalog.WithProperties(props))
	if errors.Is(err, catalog.ErrTableAlreadyExists) {
		t, err = l.cat.LoadTable(ctx, ident) // another writer created it first
	}
	if err != nil {
		return nil, &TableError{Table: name, Step: "create table", Err: err}
	}
	return t, nil
}
