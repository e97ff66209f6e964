// Package pipeline wires the stages into a run: extract (fetch pages),
// schemas (describe to Arrow), transform (pages to record batches) and load
// (Parquet lake and DuckDB warehouse).
//
// Which streams a run reads is decided once, by Select (selection.go):
// it lists the report objects, resolves what the run is asked for (by
// name, an include or exclude list, the streams to rebuild, the
// configured streams) against them, and returns the Selection that Sync
// and its dry run, Plan, both take (Config.Selection), so they accept and
// refuse the same requests.
//
// Sync runs one sync of the selected streams: report objects and
// collections take one path (stager, stage.go):
//
//  1. a report object's Arrow schema comes from its describe; a
//     collection's from its items (transform.Inferrer, widened under the
//     stream's contract when later pages call for it, the pages kept in a
//     spool file and decoded again);
//  2. read every stream's pages under the client's one request budget (a
//     report object's pages 2..N by a bounded pool of workers); each page
//     is decoded into a record batch by the one transform decoder, which
//     also yields the rows' keys for the reader's duplicate check (a
//     value longer than Config.MaxValueBytes is null in the batch and
//     written from the page body to a file of the staged partition), and
//     handed to the stream's Parquet writers in a staging folder (and,
//     with an Iceberg lake, Config.Iceberg, to the stream's
//     lakehouse.StageWriter, which stages the table's data files and
//     yields an Intent);
//  3. load the working database (load.OpenState) from the staged files,
//     each stream's history and table (a replace stream's table is a
//     view of its history's day), with the rejects, the run
//     record and the Iceberg intents (_sepipe_lake_intents), in one DuckDB
//     transaction. That transaction may begin during step 2: the early
//     load (earlyload.go) puts each stream's finished part files into
//     its history while the run still fetches, when the working
//     database is free and the processors are mostly idle (a slow or
//     rate-limited service), and gives the database up, with all it
//     loaded, when another process waits for it; the commit loads only
//     what is left, or everything again when a stream it loaded failed;
//  4. publish each staged partition into the lake by renaming it;
//  5. commit each Iceberg intent (one snapshot per stream, idempotent by
//     run id) and mark it committed;
//  6. publish the warehouse: copy the working database over
//     <out>/warehouse.duckdb by an atomic rename (load.Warehouse.Publish),
//     where readers holding the old file never block the run.
//
// An object that fails does not stop the others: the run commits what
// succeeded, records the failure, and Sync returns a *RunError listing each
// object's error. A stream whose interface the tenant is not entitled to
// (403, or 404 for a whole collection) is skipped; the delivery log stream
// passes over, with a warning naming it, a subscription deleted since it
// was listed (404 to its log, gone from the list) or whose id no URL can
// name, and commits the other logs; a log read again from its start (its
// pages shifted) discards only its own pages (collections.go). A stream
// the announced request quota would not cover, or whose 429 asks for a
// wait past the retry budget, is deferred (extract.ErrQuotaExhausted);
// skipped and deferred streams are recorded with their reason and make the run partial, and a
// later run of the same snapshot day reads only the deferred streams and
// those that failed that day (load.Warehouse.Unfinished) among its streams
// (Config.Continuation); RunError.ResumeAt says when the quota resets. A cancelled context stops
// every worker and leaves the warehouse and lake as they were (the
// Iceberg files it staged are removed). One run at a time may use an output folder (a lock file says
// who holds it).
//
// A run that dies is finished by the next: recoverAndRead publishes the
// partitions of a committed run and settles every Iceberg intent recorded
// and not marked (lakehouse.Reconcile: the snapshot log says whether the
// run's commit happened; if not it is committed now, or discarded when it
// no longer can be); one that can be neither (a data file of its table
// is gone) holds its stream alone until a full refresh rebuilds the table,
// superseding it. A type change an Iceberg table cannot take
// (*lakehouse.SchemaChangeError) fails that stream only (lake.go).
//
// Plan is Sync's dry run. What serves other commands lives elsewhere:
// webhooks (`sepipe listen`, which runs beside a sync on the same folder),
// internal/demo (`sepipe demo`), internal/bench (`sepipe bench`) and
// internal/dbtgen (`sepipe dbt-sources`); pipeline never imports the fake
// service.
//
// Imports of sepipe's: extract, internal/cpuidle, internal/faults, internal/flock, lakehouse, load, schemas, service, transform.
package pipeline
