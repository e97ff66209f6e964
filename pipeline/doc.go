// Package pipeline wires the stages into a run: extract (fetch pages),
// schemas (describe to Arrow), transform (pages to record batches) and load
// (Parquet lake and DuckDB warehouse).
//
// Sync runs one sync of the report objects:
//
//  1. list the objects and describe each one; its Arrow schema comes from
//     the describe result;
//  2. read every object's pages, page 1 first and then the rest by a
//     bounded pool of workers under the client's one request budget; each
//     worker decodes its page into a record batch and hands it to the
//     object's Parquet writer, which writes into a staging folder;
//  3. load the warehouse from the staged files, with the rejects and the
//     run record, in one DuckDB transaction;
//  4. publish each staged partition into the lake by renaming it.
//
// An object that fails does not stop the others: the run commits what
// succeeded, records the failure, and Sync returns a *RunError listing each
// object's error. A stream whose interface the tenant is not entitled to
// (403, or 404 for a whole collection) is skipped, and one the announced
// request quota would not cover is deferred (extract.ErrQuotaExhausted);
// both are recorded with their reason and make the run partial, and a
// later run of the same snapshot day reads only the deferred streams. A cancelled context stops every worker and leaves the
// warehouse and lake as they were. One run at a time may use an output
// folder (a lock file says who holds it).
package pipeline
