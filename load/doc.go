// Package load writes record batches where users read them: the Parquet
// lake and the DuckDB warehouse.
//
// The lake is hive-partitioned, one folder per object and snapshot day:
//
//	<out>/lake/<object>/snapshot_date=YYYY-MM-DD/part-00000.parquet
//
// Files are encoded by lakefile.File, the one owner of the lake files'
// format (which the Iceberg lake's files share), carry the Arrow schema (so picklist options,
// display names and the describe version travel with the data) and are
// written first into a staging folder outside the lake,
// <out>/.sepipe/staging/<run>/..., then published by renaming the whole
// partition folder into place. A reader of the lake sees the old partition
// or the new one, never a half-written file. Every write, rename and
// removal of the lake and its staging goes through the output folder
// opened as an os.Root (ParquetWriter with InsideFolder, Publish, Discard,
// Repair, CreateSpool, and CreateScratch and ClearScratch for a read's
// spilled row keys): a path that is not local to it, or a symlink that
// leaves it, is refused with ErrOutside or the kernel's error.
//
// The warehouse is two DuckDB files with the same tables. sepipe writes its
// working database, <out>/.sepipe/state.duckdb, opened with OpenState under
// a flock that serializes sepipe's processes (a sync, a listen batch).
// Warehouse.Commit loads every staged object from its Parquet files with
// read_parquet into its table of the day, folded into its versions
// (versions.go: <stream>_versions, one row per version of a row, and the
// view <stream>_history of every row of every read day over them) and,
// for an append or merge stream, its own table (a replace stream's table
// is a view of its versions on the run's day), the
// rejects and the run record in one transaction: either all of a run is
// in it or none of it. That transaction may begin before the run's
// streams are all staged (Warehouse.Begin): RunLoad.LoadFiles puts a
// stream's finished part files into its table of the day while the run fetches, RunLoad.Commit loads the rest (or refuses with
// ErrEarlyLoadStale when its tables do not hold what was loaded), and
// Warehouse.Wanted says whether another process waits for the lock
// meanwhile. The transaction outlives its context and ends only by
// Commit or Rollback (txContext). Every DuckDB database the package opens
// is closed through closeDuckDB, which first ends a query its context
// abandoned (else the database outlived Close, and the next open of its
// file in the process never returned). Under a memory limit (WithMemoryLimit)
// DuckDB gets as many threads as the limit has room for (threadsUnder),
// not one a processor, and a table of many columns fewer (forTable): its
// inserts need memory for each column on each thread (insertBytes), and
// its commit for each column (commitBytes), and every table the
// transaction has written holds some of each column until the commit
// (writtenBytes, room the commit's statements get on top of their own);
// the limit is raised, for the rest of the transaction, when one thread
// needs more than it. The
// statements DuckDB cannot run in a small limit
// get room of their own (loadRoom, Warehouse.roomLimit): the count of a
// run's new rows, on one thread (countBytes), and a merge's check of its
// rows' keys, a count of their distinct hashes (keyCheckBytes). A merge
// then deletes the old versions of the keys it brings by row ids, found
// by a join DuckDB can spill (joinBytes), which also counts the merge's
// new rows (a hash of each row's columns on both sides), and deleted by ranges
// (deleteOld), and raises the limit on top of the configured one by what
// the deletes pin, which only a checkpoint frees: the limit keeps room
// for it until the publish's checkpoint (Warehouse.deletePins,
// RunLoad.lowerMemory). A merge whose deletes would pin too much copies
// the table's other rows into a new table instead (keepOthers), as does a
// merge into a table of which a column (a field called rowId) hides
// DuckDB's row ids. Where the run's rows hold a key twice, the latest
// wins (latestRows: cursor, file, row in the file; a field called
// file_row_number, which hides DuckDB's row number in a read, makes it
// copy the rows in the order read first). Readers open
// the published copy, <out>/warehouse.duckdb: Warehouse.Publish (and
// PublishState) checkpoints the working database, copies it beside the
// published file and renames the copy over it (publish.go), so a reader
// holding the old file never blocks a sync and keeps a consistent
// snapshot, and a killed publish leaves the old file or the new one. Both
// are written in StorageVersion's format. OpenReadOnly attaches a file
// read-only to an in-memory database, so a long-running reader always
// opens the current file. An output folder an earlier release wrote in
// place is adopted by OpenState.
//
// A run that also writes an Iceberg lake (package lakehouse, wired by
// pipeline) records each stream's staged change (Table.LakeIntent, the
// lakehouse's JSON) in _sepipe_lake_intents in the same transaction, and
// marks it committed or discarded afterwards (lakeintents.go); load stores
// the JSON and never reads it.
//
// LoadEvents (events.go) puts webhook events into the working database's
// events table (every open creates it, empty, so the warehouse always has
// it); the webhooks package receives and spools them.
//
// Names (names.go) is the one owner of the names sepipe builds from service
// ids: every stream's table and lake folder name is safe (no separators,
// dots, globs, '?', '=', control characters), unique ignoring case, never
// one of sepipe's own, and recorded in _sepipe_names so it never moves;
// CheckName guards every path and identifier built from one, and
// CheckOutputPath refuses an output folder DuckDB would read as syntax.
// sepipe's own reads of staged files turn hive partitioning off. A batch
// holding a text value (string, picklist or JSON) of a megabyte or more is
// a part file of its own, that column written without Parquet statistics,
// dictionary or compression (lakefile.HugeValue).
// Otherwise a row group holds at most lakefile.RowGroupBytes of its rows as
// decoded (a length that still divides DuckDB's row group): the writer
// buffers a row group until it is complete, and DuckDB's load reads one
// at a time on each thread. A part file ends at DefaultRowGroupRows rows
// or DefaultFileBytes of them as decoded, whichever comes first, so that
// wide rows too leave finished files for the load while the run fetches.
// Rejects keep the raw row's exact bytes when it is not valid UTF-8; a
// value too long for the warehouse is kept in a file of its partition
// (Lake.WriteRawValue, raw_value_file).
//
// What people read through their own SQL (sepipe query, the dashboard) is
// package query's: the sandbox and the values as text.
//
// Files, one concern each: writer_parquet.go (the lake's part files, by
// lakefile's format), lake.go (the output folder: staging, publishing
// partitions, raw values, all through its os.Root), names.go (stream
// names), warehouse.go (opening and closing a DuckDB database, its
// options), publish.go and publish_compat.go (the working database and its
// published copy), memory.go (DuckDB's memory limit and threads while a
// run loads: loadRoom), table.go (Table, Run: what a commit takes),
// commit.go (Commit: each table's history and table in the run's one
// transaction), runload.go (the early load, during the fetch), history.go
// (history tables), merge.go (a merge stream's upsert, its deletes, and
// counting new rows), evolve.go (columns matched by name, added and
// widened), types.go (column types, from schemas.Types), watermark.go
// (an incremental stream's cursor), rejects.go, bookkeeping.go (the
// _sepipe_ tables), lakeintents.go, state.go (what earlier runs left:
// schemas, state, unfinished streams), events.go (webhook events), sql.go
// (quoting, reading staged files), lock*.go (the state lock).
//
// What the package does not do: fetch, decode, or decide when a run is
// good; that is the pipeline's job.
//
// Imports of sepipe's: internal/faults, internal/flock, lakefile, schemas, service, transform.
package load
