// Package webhooktest helps tests deliver signed webhook events to
// sepipe's listener: it starts webhooks.Listen on a free local port, signs
// and posts events as the service does. Only tests import it.
//
// Imports of sepipe's: service, webhooks.
package webhooktest
