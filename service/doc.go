// Package service holds the service's vocabulary as sepipe reads it, for
// every stage: a field of a report object as /describe gives it (Field)
// and the field type names, what a results page says about itself
// (PageInfo, ErrMalformedPage), a webhook event (Event), how an integer
// the service sends is read (ParseInt, and LooseInt for page headers: 56.0
// and "56" are 56), the one reader of the service's ISO 8601 times in
// whichever form it writes them (ParseTimestamp, ParseTime), and the
// rendering of a URL without its credentials (RedactURL).
//
// It is a leaf: it does no I/O and imports nothing of sepipe's, so the
// client (extract), the schemas, the decoder (transform) and the webhook
// receiver (webhooks) share these names and rules without the schemas, the
// decoder or the receiver importing the HTTP client.
//
// Imports nothing of sepipe's.
package service
