// Package layout holds no code: its test pins the import graph between
// sepipe's packages (DEVELOPERS.md draws it), so that a forbidden import,
// such as the schemas importing the HTTP client or a run importing the
// fake service, fails `go test ./...`.
//
// Imports nothing of sepipe's.
package layout
