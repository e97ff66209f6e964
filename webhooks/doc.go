// Package webhooks is sepipe's receiving end of the service's webhook
// deliveries, end to end:
//
//   - Receiver (receiver.go) is the HTTP handler a subscription's URL
//     points at: it checks the method, the size, the signature
//     (VerifySignature: HMAC-SHA256 under any of the subscription's keys,
//     in constant time) and the signed timestamp, parses the event (its
//     time in any ISO 8601 form service.ParseTime reads; one it cannot
//     read is stored as null with a warning, never refused, since the
//     service does not retry a 4xx), and answers 2xx only once its
//     EventSink made the event durable;
//   - Spool (spool.go) is that sink: an append-only, checksummed segment
//     log on disk, fsynced before the answer, that deduplicates event ids
//     and replays after a crash;
//   - Listen (listen.go) runs both on an address, loads the spooled
//     events into the output folder's working database in batches
//     (load.LoadEvents, under the state lock a sync also takes) and
//     publishes them to readers at most every ListenConfig.PublishInterval
//     (load.PublishState); one listener per spool (a flock).
//
// What it does not do: subscribe (extract's webhook client creates the
// subscriptions), or define the events table (load owns it, with every
// table sepipe defines).
//
// Imports of sepipe's: internal/faults, internal/flock, load, service.
package webhooks
