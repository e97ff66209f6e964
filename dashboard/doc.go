// Package dashboard serves the enablement numbers as a web page over the
// published warehouse (sepipe dashboard).
//
// Panels are data: a YAML file each (name, title, question, SQL, chart
// kind), the built-in set embedded from panels/ and, optionally, a folder
// of the user's own read on every request, so a team adds a chart without
// rebuilding sepipe. The page, its script and its style are embedded too:
// the dashboard needs no network. Each request opens the warehouse
// read-only and sandboxed (query.Open: no file access from panel
// SQL but reading the lake), runs every panel's SQL, one query each
// (query.DB.Query: no COPY, ATTACH, SET or PRAGMA), with the filters (date range, team,
// region) set as DuckDB variables (getvariable('team'), ...), and closes
// it again: no lock is held between requests, so a sync or listen never
// waits for an open dashboard. A panel whose SQL fails carries its error;
// the others are unaffected. There is no login; requests must name the
// dashboard in their Host header (localhost, an IP address, the listen
// address's host or an allowed host), so a page that rebinds its own name
// to 127.0.0.1 cannot read it.
//
// What the package does not do: write anything, or compute a number
// outside SQL (the page draws the SQL's numbers as they are).
//
// Imports of sepipe's: internal/colnames, load, query.
package dashboard
