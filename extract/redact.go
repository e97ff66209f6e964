package extract

import (
	"fmt"
	"log/slog"

	"github.com/sepipe/sepipe/service"
)

const redacted = service.Redacted

// Secret holds a credential the service gave out (a session key, a
// one-time token, a ticket, a webhook signature key). Every way of
// printing it (fmt verbs, slog, JSON and text marshalling) gives REDACTED,
// so it cannot leak through a log line, an error or a panic; Reveal
// returns the value for the one place that must send it.
type Secret string

// Reveal returns the credential itself.
func (s Secret) Reveal() string { return string(s) }

func (Secret) String() string               { return redacted }
func (Secret) GoString() string             { return redacted }
func (Secret) LogValue() slog.Value         { return slog.StringValue(redacted) }
func (Secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }
func (s Secret) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(redacted)) }

// UnmarshalText keeps the value (Secret is decoded from responses).
func (s *Secret) UnmarshalText(b []byte) error { *s = Secret(b); return nil }

func (s Secret) scrub(text string) string { return scrubValues(text, string(s)) }

// secret is the client's own name for Secret.
type secret = Secret
