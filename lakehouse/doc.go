// Package lakehouse writes sepipe's lake as Apache Iceberg tables on
// object storage (or a local folder) through an Iceberg catalog, with
// github.com/apache/iceberg-go: it never writes Iceberg metadata,
// manifests or Avro itself.
//
// Config is the destination as users write it (output.lake.iceberg): a
// SQL catalog on SQLite (one machine) or PostgreSQL (a shared catalog), or
// any REST catalog; a warehouse at file:///path or s3://bucket/prefix with
// endpoint, region and addressing. It holds no credential and Validate
// refuses one by the key at fault: S3 keys come from the standard AWS
// environment and files, PostgreSQL's password from PGPASSWORD or
// ~/.pgpass, a REST token from SEPIPE_ICEBERG_REST_TOKEN or
// SEPIPE_ICEBERG_REST_CREDENTIAL. CheckWarehouse writes and removes a
// probe object in a SQL catalog's warehouse, so that a missing bucket or
// wrong S3 settings or credentials are one error naming the warehouse.
//
// Tables. Each stream is one table <namespace>.<stream> (namespace
// "sepipe" unless the caller names one; with tenants, the tenant's name). Its
// schema is derived from the stream's Arrow schema, sepipe's source of
// truth (picklists and JSON become strings, dates timestamptz), plus two
// columns of sepipe's: snapshot_date (the run's day; _sepipe_snapshot_date
// when the stream has a field of that name in any case) and _sepipe_run_id. Tables are
// format v2, partitioned by the day column (identity, or the day
// transform), sorted by the primary key when there is one. Columns are
// matched by name against the table's current schema: a column keeps its
// field id forever, a new column gets a new one, int widens to long and
// float to double through Iceberg's UpdateSchema; any other type change is
// a *SchemaChangeError for pipeline to decide on. A column missing from a
// run reads as null.
//
// The run protocol, exactly once across the caller's state and the
// catalog:
//
//  1. Stage (or NewStageWriter, Write, Close) writes the run's Parquet
//     data files under the table's location, every column carrying its
//     Iceberg field id (PARQUET:field_id), and returns an Intent: table,
//     parent snapshot, files, mode, day, run id. The files are in no
//     snapshot yet; readers do not see them.
//  2. The caller records the Intent in its own transactional state.
//  3. Commit adds ONE snapshot whose summary carries sepipe.run-id:
//     replace and append streams replace the day's partition (a pure
//     append on a new day), merge streams remove the rows whose key is
//     among the run's (copy-on-write: the files holding them are
//     rewritten without them) and add the run's rows; an Intent with
//     Rebuild (a full refresh) removes every data file instead, so the
//     table holds the run's rows alone. Commit is a no-op
//     when a snapshot already carries the run id. A concurrent commit by
//     another writer fails the catalog's compare-and-swap; Commit then
//     loads the table again, plans again on the new state and retries, so
//     no commit is lost or applied twice.
//  4. The caller marks the Intent done.
//
// After a crash the caller hands every recorded, unmarked Intent to
// Reconcile, which reads the snapshot log: the run is there (Committed),
// or it commits it now (CommittedNow), or it must be discarded (Discard:
// its files are gone or cut short, or the log was expired past its
// parent). A merge commit that must read a data file of the table that
// is gone from storage fails with ErrDataFileLost, naming the file: no
// commit of that table can be made until an Intent with Rebuild (which
// removes every data file without reading one) replaces its contents.
//
// Expire expires snapshots older than a cutoff (the current one stays),
// lets iceberg-go delete the files only they referenced, and removes
// orphan files older than the cutoff (staged by runs that never
// committed).
//
// What the package does not do: fetch, decode or decide when a run is
// good (pipeline's job); write the DuckDB warehouse or the local Parquet
// lake (load's); commit several tables in one catalog transaction (each
// table commits on its own; the Intent makes the set recoverable);
// write equality or position delete files (a merge rewrites files, so
// any engine reads the tables without delete support); compact small
// files. A StageWriter takes Arrow batches (Write, Close, Abort), so pipeline feeds it
// the same batches as the local Parquet writers (pipeline/lake.go), and
// encodes them by the same format (lakefile, the one owner of the Parquet
// settings, the row groups, the huge-value rule, sepipe's own columns and
// the write modes): a batch holding a text value of 1 MiB or more gets a
// data file of its own, so the writer never buffers more than one.
//
// It imports lakefile and nothing else of sepipe's.
//
// Imports of sepipe's: lakefile.
package lakehouse
