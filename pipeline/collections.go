package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sepipe/sepipe/extract"
	"github.com/sepipe/sepipe/load"
	"github.com/sepipe/sepipe/schemas"
)

// CollectionSource is what a sync needs to read the collections that have
// no /describe: v4 sharing themes, v3 assets, webhook subscriptions and
// their delivery logs. *extract.Client is one.
type CollectionSource interface {
	Themes(ctx context.Context, q extract.ThemeQuery) ([]extract.Theme, error)
	ReadCollection(ctx context.Context, name string, q extract.CollectionQuery, fn extract.CollectionFunc) (extract.ReadStats, error)
	Subscriptions(ctx context.Context) ([]extract.Subscription, error)
	SubscriptionLogs(ctx context.Context, id string) ([]extract.DeliveryLog, error)
}

var _ CollectionSource = (*extract.Client)(nil)

// The collection streams and their tables.
const (
	StreamThemes        = "themes"
	StreamAssets        = "assets"
	StreamSubscriptions = "webhook_subscriptions"
	StreamDeliveryLogs  = "webhook_delivery_logs"
)

// Collections lists the collection streams, in sync order.
var Collections = []string{StreamThemes, StreamAssets, StreamSubscriptions, StreamDeliveryLogs}

// WebhookCollections need the developer API token; the others the access
// token.
var WebhookCollections = []string{StreamSubscriptions, StreamDeliveryLogs}

func colField(id, typ, name string) extract.Field {
	return extract.Field{ID: id, DisplayName: name, Type: typ}
}

// collectionFields are the columns sepipe gives each collection. Fields
// the service sends beyond them are kept in the json column extra; header
// values (which often hold the destination's credentials) are not kept,
// and URLs are stored with their credentials redacted.
var collectionFields = map[string][]extract.Field{
	StreamThemes: {
		colField("id", "string", "Theme ID"), colField("title", "string", "Title"),
		colField("isGlobal", "boolean", "Global"), colField("isDefault", "boolean", "Default"),
		colField("aboutDescription", "string", "About text"), colField("logoUrl", "string", "Logo URL"),
		colField("displayImageUrl", "string", "Display image URL"),
		colField("headerColor", "string", "Header color"), colField("headerFontColor", "string", "Header font color"),
		colField("accentColor", "string", "Accent color"), colField("accentFontColor", "string", "Accent font color"),
		colField("createdAt", "date", "Created"), colField("updatedAt", "date", "Updated"),
		colField("divisionId", "string", "Division ID (null for the global theme)"),
		colField("extra", "json", "Fields sepipe does not type"),
	},
	StreamAssets: {
		colField("id", "string", "Asset ID"), colField("name", "string", "Name"), colField("type", "string", "Type (file, folder, link)"),
		colField("fileType", "string", "File type"), colField("sizeBytes", "int", "Size (bytes)"),
		colField("createdAt", "date", "Created"), colField("updatedAt", "date", "Updated"),
		colField("ownerId", "string", "Owner ID"), colField("divisionId", "string", "Division ID"),
		colField("tags", "json", "Tags (JSON array)"), colField("views", "int", "Views"), colField("shares", "int", "Shares"),
		colField("extra", "json", "Fields sepipe does not type"),
	},
	StreamSubscriptions: {
		colField("id", "string", "Subscription ID"), colField("name", "string", "Name"),
		colField("url", "string", "Destination URL (credentials redacted)"), colField("method", "string", "Delivery method"),
		colField("types", "json", "Event types (JSON array)"), colField("headerNames", "json", "Custom header names (values are not stored)"),
		colField("createdAt", "date", "Created"), colField("updatedAt", "date", "Updated"),
		colField("requestCount", "int", "Requests sent"), colField("extra", "json", "Fields sepipe does not type"),
	},
	StreamDeliveryLogs: {
		colField("id", "string", "Log entry ID"), colField("subscriptionId", "string", "Subscription ID"),
		colField("eventId", "string", "Event ID"), colField("eventType", "string", "Event type"), colField("attempt", "int", "Attempt"),
		colField("requestMethod", "string", "Request method"), colField("requestUrl", "string", "Request URL (credentials redacted)"),
		colField("requestBody", "string", "Request body"), colField("responseStatus", "int", "Response status (0: no response)"),
		colField("responseBody", "string", "Response body (first KiB)"), colField("error", "string", "Transport error"),
		colField("deliveredAt", "date", "Delivered at"), colField("durationMs", "int", "Duration (ms)"),
		colField("outcome", "string", "Outcome (delivered, failed, retrying)"), colField("extra", "json", "Fields sepipe does not type"),
	},
}

// rowWriter appends one row at a time to a record builder, column by column
// in schema order.
type rowWriter struct {
	b   *array.RecordBuilder
	col int
}

func (w *rowWriter) next() array.Builder { b := w.b.Field(w.col); w.col++; return b }

func (w *rowWriter) str(s string) { w.next().(*array.StringBuilder).Append(s) }

// opt appends s, or null when it is empty.
func (w *rowWriter) opt(s string) {
	if s == "" {
		w.next().AppendNull()
		return
	}
	w.str(s)
}

func (w *rowWriter) boolean(v bool) { w.next().(*array.BooleanBuilder).Append(v) }

func (w *rowWriter) int(v int64) { w.next().(*array.Int64Builder).Append(v) }

func (w *rowWriter) intp(v *int64) {
	if v == nil {
		w.next().AppendNull()
		return
	}
	w.int(*v)
}

func (w *rowWriter) time(t time.Time) {
	if t.IsZero() {
		w.next().AppendNull()
		return
	}
	w.next().(*array.TimestampBuilder).Append(arrow.Timestamp(t.UnixMicro()))
}

func (w *rowWriter) json(v any) {
	if v == nil {
		w.next().AppendNull()
		return
	}
	if raw, ok := v.(json.RawMessage); ok {
		if len(raw) == 0 {
			w.next().AppendNull()
			return
		}
		w.str(string(raw))
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		w.next().AppendNull()
		return
	}
	w.str(string(b))
}

func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return extract.RedactURL(u)
}

func writeTheme(w *rowWriter, t extract.Theme) {
	w.str(t.ID)
	w.opt(t.Title)
	w.boolean(t.IsGlobal)
	w.boolean(t.IsDefault)
	w.opt(t.DisplayData.AboutDescription)
	if t.DisplayData.Logo != nil {
		w.opt(t.DisplayData.Logo.URL)
	} else {
		w.opt("")
	}
	if t.DisplayData.DisplayImage != nil {
		w.opt(t.DisplayData.DisplayImage.URL)
	} else {
		w.opt("")
	}
	w.opt(t.ColorSettings.HeaderColor)
	w.opt(t.ColorSettings.HeaderFontColor)
	w.opt(t.ColorSettings.AccentColor)
	w.opt(t.ColorSettings.AccentFontColor)
	w.time(t.CreatedAt)
	w.time(t.UpdatedAt)
	if t.Division != nil {
		w.opt(t.Division.ID)
	} else {
		w.opt("")
	}
	w.json(t.Extra)
}

func writeAsset(w *rowWriter, a extract.Asset) {
	var stats struct {
		Stats *struct {
			Views  *int64 `json:"views"`
			Shares *int64 `json:"shares"`
		} `json:"stats"`
	}
	if len(a.Extra) > 0 {
		_ = json.Unmarshal(a.Extra, &stats) // a malformed stats block leaves the columns null; extra keeps it
	}
	w.str(a.ID)
	w.opt(a.Name)
	w.opt(a.Type)
	w.opt(a.FileType)
	w.intp(a.SizeBytes)
	w.time(a.CreatedAt)
	w.time(a.UpdatedAt)
	w.opt(a.OwnerID)
	w.opt(a.DivisionID)
	if a.Tags == nil {
		w.json(nil)
	} else {
		w.json(a.Tags)
	}
	if stats.Stats != nil {
		w.intp(stats.Stats.Views)
		w.intp(stats.Stats.Shares)
	} else {
		w.intp(nil)
		w.intp(nil)
	}
	w.json(a.Extra)
}

func writeSubscription(w *rowWriter, s extract.Subscription) {
	names := make([]string, len(s.Headers))
	for i, h := range s.Headers {
		names[i] = h.Name
	}
	w.str(s.ID)
	w.opt(s.Name)
	w.opt(redactURL(s.URL))
	w.opt(s.Method)
	w.json(s.Types)
	w.json(names)
	w.time(s.CreatedAt)
	w.time(s.UpdatedAt)
	w.int(s.RequestCount)
	w.json(s.Extra)
}

func writeDeliveryLog(w *rowWriter, l extract.DeliveryLog) {
	w.str(l.ID)
	w.opt(l.SubscriptionID)
	w.opt(l.EventID)
	w.opt(l.EventType)
	w.int(int64(l.Attempt))
	w.opt(l.Request.Method)
	w.opt(redactURL(l.Request.URL))
	w.opt(l.Request.Body)
	w.int(int64(l.Response.Status))
	w.opt(l.Response.Body)
	w.opt(l.Error)
	w.time(l.DeliveredAt)
	w.int(l.DurationMs)
	w.opt(l.Outcome)
	w.json(l.Extra)
}

// collectionSink builds batches of one collection and writes them to its
// staging Parquet writer.
type collectionSink struct {
	mem    memory.Allocator
	schema *arrow.Schema
	rb     *array.RecordBuilder
	pw     *load.ParquetWriter
	dir    string
	name   string
	rows   int
}

func (s *collectionSink) row(write func(w *rowWriter)) error {
	w := rowWriter{b: s.rb}
	write(&w)
	s.rows++
	if s.rows%1000 == 0 {
		return s.flush()
	}
	return nil
}

func (s *collectionSink) flush() error {
	rec := s.rb.NewRecordBatch()
	defer rec.Release()
	return s.pw.Write(rec)
}

// restart throws away what was written (the read starts over).
func (s *collectionSink) restart() error {
	rec := s.rb.NewRecordBatch()
	rec.Release()
	s.pw.Abort()
	pw, err := load.NewParquetWriter(s.dir, s.name, s.schema, load.WithParquetAllocator(s.mem))
	if err != nil {
		return err
	}
	s.pw, s.rows = pw, 0
	return nil
}

// stageCollection reads one collection stream and writes it to staging.
func stageCollection(ctx context.Context, src CollectionSource, lake load.Lake, run *Result, name string, cfg Config, log *slog.Logger) *stagedObject {
	t0 := time.Now()
	so := &stagedObject{object: name}
	cfg.Progress.ObjectStarted(name)
	fail := func(step string, err error) *stagedObject {
		so.err = &ObjectError{Object: name, Step: step, Err: err}
		status := classify(name, err)
		if status == StatusFailed {
			log.Error("collection failed", "collection", name, "step", step, "err", err)
		}
		cfg.Progress.ObjectDone(ObjectResult{Object: name, Status: status, Err: so.err})
		return so
	}
	sc := cfg.Streams[name]
	if sc.Cursor != "" {
		return fail("config", fmt.Errorf("collection %s cannot be read incrementally (no cursor filter in its interface)", name))
	}
	mode, _ := load.ParseWriteMode(string(sc.Mode))
	schema, err := schemas.ForCollection(name, collectionFields[name])
	if err != nil {
		return fail("schema", err)
	}
	dir := lake.StagingDir(run.RunID, name, run.SnapshotDate)
	pw, err := load.NewParquetWriter(dir, name, schema, load.WithParquetAllocator(cfg.Allocator))
	if err != nil {
		return fail("write", err)
	}
	sink := &collectionSink{mem: cfg.Allocator, schema: schema, rb: array.NewRecordBuilder(cfg.Allocator, schema), pw: pw, dir: dir, name: name}
	defer sink.rb.Release()
	var stats extract.ReadStats
	switch name {
	case StreamThemes:
		var items []extract.Theme
		if items, err = src.Themes(ctx, extract.ThemeQuery{}); err == nil {
			for _, it := range items {
				if err = sink.row(func(w *rowWriter) { writeTheme(w, it) }); err != nil {
					break
				}
			}
		}
	case StreamAssets:
		stats, err = src.ReadCollection(ctx, "assets", extract.CollectionQuery{}, func(ctx context.Context, p *extract.CollectionPage) error {
			if p.Restart {
				return sink.restart()
			}
			for _, raw := range p.Items {
				var a extract.Asset
				if err := json.Unmarshal(raw, &a); err != nil {
					return fmt.Errorf("asset at offset %d: %w", p.Offset, err)
				}
				if err := sink.row(func(w *rowWriter) { writeAsset(w, a) }); err != nil {
					return err
				}
			}
			cfg.Progress.PageDone(name, p.Offset, len(p.Items), -1)
			return nil
		})
	case StreamSubscriptions, StreamDeliveryLogs:
		var subs []extract.Subscription
		if subs, err = src.Subscriptions(ctx); err != nil {
			break
		}
		if name == StreamSubscriptions {
			for _, s := range subs {
				if err = sink.row(func(w *rowWriter) { writeSubscription(w, s) }); err != nil {
					break
				}
			}
			break
		}
		for _, s := range subs {
			var logs []extract.DeliveryLog
			if logs, err = src.SubscriptionLogs(ctx, s.ID); err != nil {
				err = fmt.Errorf("logs of subscription %s: %w", s.ID, err)
				break
			}
			for _, l := range logs {
				if l.SubscriptionID == "" {
					l.SubscriptionID = s.ID
				}
				if err = sink.row(func(w *rowWriter) { writeDeliveryLog(w, l) }); err != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
	default:
		err = fmt.Errorf("unknown collection %q", name)
	}
	if err == nil {
		err = sink.flush()
	}
	if err != nil {
		sink.pw.Abort()
		return fail("read", err)
	}
	if err := sink.pw.Close(); err != nil {
		sink.pw.Abort()
		return fail("write", err)
	}
	dur := time.Since(t0)
	pw = sink.pw
	so.table = load.Table{
		Object: name, Schema: schema, Files: pw.Files(), Rows: pw.Rows(), Mode: mode,
		PrimaryKey: sc.PrimaryKey, Describe: collectionFields[name],
		Stats: load.ObjectStats{Rows: pw.Rows(), Pages: stats.Pages, Requests: stats.Requests, Retries: stats.Retries, Duration: dur},
	}
	if mode == load.Merge && len(sc.PrimaryKey) == 0 {
		so.table.PrimaryKey = []string{"id"}
	}
	so.result = ObjectResult{Object: name, Mode: mode, Status: StatusOK, Rows: pw.Rows(), Pages: stats.Pages, Requests: stats.Requests,
		Retries: stats.Retries, Duration: dur, SchemaVersion: schemas.SchemaVersion(schema)}
	log.Info("collection staged", "collection", name, "rows", pw.Rows(), "duration", dur.Round(time.Millisecond))
	cfg.Progress.ObjectDone(so.result)
	return so
}

// isCollection reports whether a stream name is a collection.
func isCollection(name string) bool { return slices.Contains(Collections, name) }

// IsCollection reports whether a stream is a collection (not a report
// object).
func IsCollection(name string) bool { return isCollection(name) }
