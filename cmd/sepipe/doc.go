// Command sepipe syncs a sales-enablement service's learning reports,
// collections and webhook events into a Parquet lake and a DuckDB
// warehouse the user owns.
//
// Runs:
//
//	sepipe sync        sync a tenant (token in SEPIPE_ACCESS_TOKEN or a config file)
//	sepipe plan        what a sync would do, without moving data
//	sepipe schedule    run syncs on a cron schedule, unattended
//	sepipe listen      receive signed webhook events into the warehouse
//	sepipe publish     publish the working database to warehouse.duckdb
//	sepipe status      the last runs, from the warehouse
//
// The service:
//
//	sepipe auth, login     credentials and OAuth tokens
//	sepipe check           reach the service and say what the tenant may use
//	sepipe discover        list report objects and collections
//	sepipe describe        one object's fields
//	sepipe webhooks        list, get, create, update, delete subscriptions; logs
//
// The warehouse:
//
//	sepipe query           read-only SQL over the published warehouse
//	sepipe dashboard       a web page over the warehouse
//	sepipe dbt-sources     the dbt project's sources.yml
//	sepipe lake expire     expire old snapshots of the Iceberg lake
//	sepipe history rebuild rebuild the warehouse's history of streams from the lake
//
// A config that lists tenants (tenants:) takes --tenant NAME on every
// command that works on one tenant; each tenant's data is in
// <output.dir>/<tenant>.
//
// Trying and measuring:
//
//	sepipe demo            sync a built-in fake tenant into ./sepipe-demo
//	sepipe simulate        serve the fake tenant for other tools
//	sepipe bench           measure a sync (docs/performance.md)
//	sepipe version
//
// The command is thin: flags and output here, the work in the packages
// (pipeline, webhooks, load, dashboard, internal/...); the CLI calls their
// validators and defaults. docs/cli.md lists every flag and config key.
// Exit codes: 0 ok, 1 failed, 2 bad usage or config, 3 partly failed.
//
// Imports of sepipe's: any package (it is the command).
package main
