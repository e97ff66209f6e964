// Package demo builds `sepipe demo`'s output folder: it starts the fake
// service on loopback and syncs its tenant one run per day for a few days
// (the tenant's clock advancing between runs), with a webhook receiver
// (webhooks.Listen) subscribed while each day passes, so the lake, the
// warehouse, the history tables and the events table hold a short,
// realistic history. Tests use it to get a warehouse like a user's.
//
// It serves a command and tests; it starts the fake (extract/servicetest)
// and is never part of a run against a real tenant.
//
// Imports of sepipe's: extract, extract/servicetest, pipeline, webhooks.
package demo
