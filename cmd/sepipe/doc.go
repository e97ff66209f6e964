// Command sepipe syncs a sales-enablement service's learning reports into a
// Parquet lake and a DuckDB warehouse the user owns.
//
//	sepipe demo                      sync a built-in fake tenant into ./sepipe-demo
//	sepipe simulate --addr :8080     serve the fake tenant for other tools
//	sepipe sync --base-url URL       sync a real tenant (token in SEPIPE_ACCESS_TOKEN)
//	sepipe version
//
// The command is thin: flags and output here, the work in package pipeline.
// Exit codes: 0 ok, 1 failed, 2 bad usage or config, 3 partly failed.
package main
