package dashboard

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/big"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/sepipe/sepipe/internal/colnames"
	"github.com/sepipe/sepipe/load"
	"github.com/sepipe/sepipe/query"
)

//go:embed web
var web embed.FS

// Config says which output folder a dashboard shows and where the user's
// own panels are.
type Config struct {
	// Out is the output folder; the dashboard reads Out/warehouse.duckdb.
	Out string
	// PanelsDir, if set, is a folder of the user's own panel files
	// (*.yaml), read on every request.
	PanelsDir string
	// QueryTimeout bounds each panel's SQL (default 30 s).
	QueryTimeout time.Duration
	// Logger receives one line per failed panel (default: discard).
	Logger *slog.Logger
	// Addr is the address the dashboard listens on (HOST:PORT); requests
	// naming its host are accepted (see Handler).
	Addr string
	// AllowedHosts are further host names requests may name, without a
	// port, such as the name a proxy serves the dashboard under
	// (ParseAllowedHosts reads them from a list).
	AllowedHosts []string
	// WriteTimeout bounds the writing of each answer, from its first byte
	// to its last (default 30 s): a client that stops reading is cut
	// then, and never holds what other viewers wait for.
	WriteTimeout time.Duration
	// Wrap, if set, wraps the dashboard's handler inside its host check:
	// sepipe dashboard answers its monitoring's requests (metrics,
	// probes) on the same listener.
	Wrap func(http.Handler) http.Handler
}

// Bounds of what one answer holds. A panel's rows stop at maxRows rows or
// maxPanelBytes bytes of JSON, whichever comes first, and the panels of
// one answer share maxAnswerBytes: a panel past a bound carries
// Truncated and the page says so. An answer is computed whole before it
// is written (its load slot is free while it is written), so these bound
// what one request holds in memory.
const (
	maxRows        = 1000
	maxPanelBytes  = 1 << 20
	maxAnswerBytes = 8 << 20
)

// maxWriting bounds the bytes of the answers being written at once, to
// clients that may read slowly or never: past it a request is answered
// 503 with Retry-After (the page tries again), so clients that stop
// reading cannot make the dashboard hold more than this until their write
// deadline.
const maxWriting = 64 << 20

// Filters narrow the panels: a date range (on snapshot or event days) and
// a team and a region of learners. Empty means no filter. Panels read them
// as getvariable('date_from'), getvariable('date_to') (DATE),
// getvariable('team') and getvariable('region') (VARCHAR); NULL when not
// set.
type Filters struct {
	From   string `json:"date_from,omitempty"`
	To     string `json:"date_to,omitempty"`
	Team   string `json:"team,omitempty"`
	Region string `json:"region,omitempty"`
}

// filtersFrom reads and checks the filters of a request's query string.
func filtersFrom(r *http.Request) (Filters, error) {
	q := r.URL.Query()
	f := Filters{From: q.Get("from"), To: q.Get("to"), Team: q.Get("team"), Region: q.Get("region")}
	for _, d := range []struct{ name, v string }{{"from", f.From}, {"to", f.To}} {
		if d.v == "" {
			continue
		}
		if _, err := time.Parse("2006-01-02", d.v); err != nil {
			return f, fmt.Errorf("filter %s=%q: want a date YYYY-MM-DD", d.name, d.v)
		}
	}
	for _, s := range []struct{ name, v string }{{"team", f.Team}, {"region", f.Region}} {
		if len(s.v) > 200 || strings.ContainsRune(s.v, 0) || !utf8.ValidString(s.v) {
			return f, fmt.Errorf("filter %s: at most 200 characters of UTF-8, no NUL", s.name)
		}
	}
	return f, nil
}

// statements set f as DuckDB variables.
func (f Filters) statements() []string {
	val := func(v, typ string) string {
		if v == "" {
			return "NULL::" + typ
		}
		return "CAST(" + load.Literal(v) + " AS " + typ + ")"
	}
	return []string{
		"SET VARIABLE date_from = " + val(f.From, "DATE"),
		"SET VARIABLE date_to = " + val(f.To, "DATE"),
		"SET VARIABLE team = " + val(f.Team, "VARCHAR"),
		"SET VARIABLE region = " + val(f.Region, "VARCHAR"),
	}
}

// Result is a panel with its answer.
type Result struct {
	Panel
	Columns []string `json:"columns,omitempty"`
	Rows    [][]any  `json:"rows,omitempty"`
	// Truncated is set when the panel's SQL returned more than Rows
	// holds; TruncatedBy says which bound stopped it: "rows" (maxRows) or
	// "bytes" (maxPanelBytes, or what the answer's other panels left of
	// maxAnswerBytes), and TruncatedAt that bound.
	Truncated   bool   `json:"truncated,omitempty"`
	TruncatedBy string `json:"truncated_by,omitempty"`
	TruncatedAt int    `json:"truncated_at,omitempty"`
	// Missing is set when a table the panel requires is not in the
	// warehouse: the panel has no data yet, which is not an error.
	Missing string `json:"missing,omitempty"`

	bytes int // JSON bytes of Rows
}

// Options are the values the page's filters offer.
type Options struct {
	Teams   []string `json:"teams"`
	Regions []string `json:"regions"`
	MinDay  string   `json:"min_day,omitempty"`
	MaxDay  string   `json:"max_day,omitempty"`
}

// Answer is what /api/panels returns.
type Answer struct {
	Warehouse   string    `json:"warehouse"`
	PublishedAt time.Time `json:"published_at"`
	Filters     Filters   `json:"filters"`
	Options     Options   `json:"options"`
	Panels      []Result  `json:"panels"`
}

// maxLoads bounds the answers Handler computes at once.
const maxLoads = 2

// withDefaults is cfg with the defaults Config documents in place of zero
// values: QueryTimeout 30 s, a Logger that discards. Handler and Query
// both start from it.
func (cfg Config) withDefaults() Config {
	if cfg.QueryTimeout <= 0 {
		cfg.QueryTimeout = 30 * time.Second
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg
}

// Handler serves the page (/), its assets, and /api/panels, to requests
// whose Host header names this dashboard: localhost, an IP address, the
// host of cfg.Addr or one of cfg.AllowedHosts, at any port. Any other
// host is answered 421 Misdirected Request: the dashboard has no login,
// and a page on another site that rebinds its name to 127.0.0.1 (DNS
// rebinding) sends that name.
//
// At most maxLoads answers are computed at once; later requests wait for
// one to end (or for their client to leave). Each answer opens the
// warehouse in a DuckDB of its own, which takes every processor and may
// take most of the memory: a room of people refreshing the page at once
// must not run the machine out of either. An answer is computed whole,
// within its bounds (maxAnswerBytes), and its load slot freed before it
// is written; every answer is written under cfg.WriteTimeout, and at most
// maxWriting bytes are being written at once, so a client that never
// reads holds neither a slot nor the others' answers.
func Handler(cfg Config) http.Handler {
	cfg = cfg.withDefaults()
	mux := http.NewServeMux()
	loads := make(chan struct{}, maxLoads)
	writing := &byteBudget{max: maxWriting}
	mux.HandleFunc("GET /api/panels", func(w http.ResponseWriter, r *http.Request) {
		status, body := func() (int, []byte) {
			select {
			case loads <- struct{}{}:
				defer func() { <-loads }()
			case <-r.Context().Done():
				return 0, nil // the client left while it waited
			}
			return answer(r, cfg)
		}()
		if body == nil {
			return
		}
		if !writing.take(len(body)) {
			w.Header().Set("Retry-After", "2")
			status, body = http.StatusServiceUnavailable, jsonBody(map[string]string{
				"error": "the dashboard is busy writing answers to other viewers; try again in a moment"})
		} else {
			defer writing.give(len(body))
		}
		writeDeadline(w, cfg.WriteTimeout)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(status)
		w.Write(body)
	})
	mux.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) {
		writeDeadline(w, cfg.WriteTimeout)
		name := strings.TrimPrefix(r.URL.Path, "/")
		if name == "" {
			name = "index.html"
		}
		b, err := web.ReadFile("web/" + name)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		switch filepath.Ext(name) {
		case ".html":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
		case ".js":
			w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		case ".css":
			w.Header().Set("Content-Type", "text/css; charset=utf-8")
		}
		w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; script-src 'self'; img-src 'self' data:")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Write(b)
	})
	var h http.Handler = mux
	if cfg.Wrap != nil {
		h = cfg.Wrap(mux)
	}
	return newHostGuard(cfg.Addr, cfg.AllowedHosts, h)
}

// writeDeadline bounds the writing of an answer that starts now: a client
// that stops reading is cut at the deadline. A ResponseWriter that cannot
// take one (a test's recorder) has no socket to stall on.
func writeDeadline(w http.ResponseWriter, d time.Duration) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(d))
}

// byteBudget counts the bytes of the answers being written.
type byteBudget struct {
	mu       sync.Mutex
	max, now int
}

// take reserves n bytes, or reports false when they would pass the
// budget (an answer is always taken when nothing else is being written).
func (b *byteBudget) take(n int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.now > 0 && b.now+n > b.max {
		return false
	}
	b.now += n
	return true
}

func (b *byteBudget) give(n int) {
	b.mu.Lock()
	b.now -= n
	b.mu.Unlock()
}

func jsonBody(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(map[string]string{"error": err.Error()})
	}
	return append(b, '\n')
}

// answer computes the answer to a request for /api/panels: its status and
// its JSON body, or a nil body when the client left.
func answer(r *http.Request, cfg Config) (int, []byte) {
	f, err := filtersFrom(r)
	if err != nil {
		return http.StatusBadRequest, jsonBody(map[string]string{"error": err.Error()})
	}
	ans, err := Query(r.Context(), cfg, f)
	if r.Context().Err() != nil {
		return 0, nil
	}
	if err != nil {
		status := http.StatusInternalServerError
		if errors.Is(err, load.ErrNoWarehouse) {
			status = http.StatusServiceUnavailable
		}
		return status, jsonBody(map[string]string{"error": err.Error()})
	}
	return http.StatusOK, jsonBody(ans)
}

// Query answers every panel under f: it opens the published warehouse
// read-only and sandboxed, runs each panel's SQL, and closes it. Zero
// fields of cfg take Config's defaults, as in Handler.
func Query(ctx context.Context, cfg Config, f Filters) (*Answer, error) {
	cfg = cfg.withDefaults()
	panels, err := Panels(cfg.PanelsDir)
	if err != nil {
		return nil, err
	}
	lake := load.Lake{Root: cfg.Out}
	wh, err := query.Open(ctx, lake.WarehousePath(), lake.LakeDir())
	if err != nil {
		if errors.Is(err, load.ErrNoWarehouse) {
			return nil, fmt.Errorf("%w: run 'sepipe sync' (or 'sepipe demo') into %s first", err, cfg.Out)
		}
		return nil, err
	}
	defer wh.Close()
	db := wh.SQL()
	for _, s := range f.statements() {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return nil, fmt.Errorf("dashboard: set filter (%s): %w", s, err)
		}
	}
	ans := &Answer{Warehouse: lake.WarehousePath(), PublishedAt: lake.PublishedAt(), Filters: f, Options: options(ctx, wh)}
	left := maxAnswerBytes
	for _, p := range panels {
		res := Result{Panel: p}
		for _, t := range p.Requires {
			if ok, err := wh.HasTable(ctx, t); err == nil && !ok {
				res.Missing = t
			}
		}
		if p.Err == "" && res.Missing == "" {
			bound := min(maxPanelBytes, left)
			err := run(ctx, wh, cfg.QueryTimeout, bound, &res)
			left -= res.bytes
			if err != nil {
				res.Err = fmt.Sprintf("panel %s (%s): %v", p.Name, p.Source, err)
				cfg.Logger.Warn("dashboard: panel failed", "panel", p.Name, "source", p.Source, "error", err)
			}
		}
		ans.Panels = append(ans.Panels, res)
	}
	return ans, nil
}

// options lists the teams, regions and snapshot days a warehouse has;
// what it cannot read is left empty.
func options(ctx context.Context, wh *query.DB) Options {
	o := Options{Teams: []string{}, Regions: []string{}}
	list := func(q string) []string {
		out := []string{}
		rows, err := wh.SQL().QueryContext(ctx, q)
		if err != nil {
			return out
		}
		defer rows.Close()
		for rows.Next() {
			var s string
			if rows.Scan(&s) == nil {
				out = append(out, s)
			}
		}
		return out
	}
	o.Teams = list(`SELECT DISTINCT team FROM "user" WHERE team IS NOT NULL ORDER BY 1`)
	o.Regions = list(`SELECT DISTINCT region FROM "user" WHERE region IS NOT NULL ORDER BY 1`)
	// The stream's read days (the history's days, without expanding it).
	if d := list(`SELECT strftime(min(day), '%Y-%m-%d') FROM _sepipe_history_days WHERE object = 'userCourseProgress'
		UNION ALL SELECT strftime(max(day), '%Y-%m-%d') FROM _sepipe_history_days WHERE object = 'userCourseProgress'`); len(d) == 2 {
		o.MinDay, o.MaxDay = d[0], d[1]
	}
	return o
}

// run answers one panel, its rows bounded to maxRows and to bound bytes
// of JSON (res.bytes is what they took).
func run(ctx context.Context, wh *query.DB, timeout time.Duration, bound int, res *Result) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	rows, err := wh.Query(ctx, res.SQL)
	if err != nil {
		return err
	}
	defer rows.Close()
	if res.Columns, err = rows.Columns(); err != nil {
		return err
	}
	res.Columns = colnames.Unique(res.Columns) // x and y name one column each
	cts, err := rows.ColumnTypes()
	if err != nil {
		return err
	}
	for rows.Next() {
		if len(res.Rows) == maxRows {
			res.Truncated, res.TruncatedBy, res.TruncatedAt = true, "rows", maxRows
			break
		}
		vals := make([]any, len(res.Columns))
		ptrs := make([]any, len(vals))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		for i, v := range vals {
			vals[i] = jsonValue(v, cts[i].DatabaseTypeName())
		}
		// The row's size as the answer will carry it (and a comma).
		b, err := json.Marshal(vals)
		if err != nil {
			return err
		}
		if res.bytes+len(b)+1 > bound {
			res.Truncated, res.TruncatedBy, res.TruncatedAt = true, "bytes", bound
			break
		}
		res.bytes += len(b) + 1
		res.Rows = append(res.Rows, vals)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, c := range append([]string{res.X, res.Series}, res.Y...) {
		if c != "" && !containsFold(res.Columns, c) {
			return fmt.Errorf("the SQL returns no column %q (it returns %s)", c, strings.Join(res.Columns, ", "))
		}
	}
	return nil
}

func containsFold(cols []string, c string) bool {
	for _, x := range cols {
		if strings.EqualFold(x, c) {
			return true
		}
	}
	return false
}

// jsonValue turns a scanned value, of the DuckDB type dbType, into what
// the page shows: numbers (DECIMAL and a UNION's number included) as
// numbers, NaN and infinities as null, days as YYYY-MM-DD (a timestamp at
// midnight UTC too), other timestamps as RFC 3339; everything else as
// query.ValueText writes it (INTERVAL, UUID, TIME, and LIST, STRUCT, MAP
// or JSON values as JSON text).
func jsonValue(v any, dbType string) any {
	switch x := v.(type) {
	case nil, bool, string, int64, int32, int16, int8, uint64, uint32, uint16, uint8:
		return x
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil
		}
		return x
	case float32:
		return jsonValue(float64(x), dbType)
	case time.Time:
		if strings.HasPrefix(dbType, "TIMESTAMP") {
			u := x.UTC()
			if u.Hour() == 0 && u.Minute() == 0 && u.Second() == 0 && u.Nanosecond() == 0 {
				return u.Format("2006-01-02")
			}
			return u.Format(time.RFC3339)
		}
	case *big.Int: // HUGEINT: sum() of BIGINT
		if x.IsInt64() {
			return x.Int64()
		}
		f, _ := new(big.Float).SetInt(x).Float64()
		return f
	}
	if j := query.ValueJSON(v, dbType); len(j) > 0 && (j[0] == '-' || j[0] >= '0' && j[0] <= '9') {
		return json.Number(j)
	}
	return query.ValueText(v, dbType)
}
