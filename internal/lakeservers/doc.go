// Package lakeservers starts the real servers the Iceberg lake tests need on
// 127.0.0.1: an S3 server (versitygw, built once from the Go module proxy
// into the user's cache folder, POSIX backend in a temporary folder) and
// a PostgreSQL (Debian's binaries, initdb and pg_ctl into a temporary
// folder). Each is stopped and removed by the test's cleanup.
//
// A server that cannot be had skips the test with the reason, unless the
// CI environment variable is set: then the test fails.
//
// Imports nothing of sepipe's.
package lakeservers
