// Package dbtgen generates the dbt project's sources.yml (`sepipe
// dbt-sources`): one source table per report object and collection, with
// its history table, and sepipe's own tables, columns typed and described
// from the live /describe results and the collections' seed fields, and
// tests (unique and not-null keys, accepted picklist values, relationships)
// where the data supports them. Every text that reaches the YAML is
// escaped for YAML and for Jinja.
//
// It reads the service through extract.Source and writes one file; it
// does not touch the warehouse. The dbt project itself lives in dbt/.
//
// Imports of sepipe's: extract, load, pipeline, schemas, service.
package dbtgen
