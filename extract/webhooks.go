package extract

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"
)

// Header is one header sent with each webhook delivery. Header values
// often carry the destination's credentials: a Header prints and logs its
// value as REDACTED (JSON keeps it, to be sent).
type Header struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Format prints the header with its value redacted, for every verb.
func (h Header) Format(f fmt.State, _ rune) { _, _ = fmt.Fprintf(f, "{%s: %s}", h.Name, redacted) }

// LogValue logs the header with its value redacted.
func (h Header) LogValue() slog.Value {
	return slog.GroupValue(slog.String("name", h.Name), slog.String("value", redacted))
}

// SubscriptionRequest is the body of a subscription create or update.
type SubscriptionRequest struct {
	Name    string   `json:"name"`
	URL     string   `json:"url"`    // destination, absolute http(s)
	Method  string   `json:"method"` // GET or POST
	Headers []Header `json:"headers"`
	Types   []string `json:"types"` // event types, e.g. COURSE_COMPLETED
}

// Validate checks the request before it is sent.
func (r SubscriptionRequest) Validate() error {
	var errs []error
	if r.Name == "" {
		errs = append(errs, errors.New("name is required"))
	}
	if u, err := url.Parse(r.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, errors.New("url: want an absolute http or https URL"))
	}
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		errs = append(errs, fmt.Errorf("method %q: want GET or POST", r.Method))
	}
	if len(r.Types) == 0 {
		errs = append(errs, errors.New("types: want at least one event type"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("extract: subscription request: %w", errors.Join(errs...))
	}
	return nil
}

// Subscription is a webhook subscription. Fields the struct does not type
// are kept in Extra.
type Subscription struct {
	ID           string    `json:"id"` // a ULID
	Name         string    `json:"name"`
	URL          string    `json:"url"`
	Method       string    `json:"method"`
	Headers      []Header  `json:"headers"`
	Types        []string  `json:"types"`
	CreatedAt    time.Time `json:"createdAt,omitzero"` // zero: a time in no ISO 8601 form
	UpdatedAt    time.Time `json:"updatedAt,omitzero"`
	RequestCount int64     `json:"requestCount"`
	// SignatureKey is the delivery signing secret, returned on create
	// only; it prints as REDACTED (use Reveal).
	SignatureKey Secret          `json:"signatureKey"`
	Extra        json.RawMessage `json:"-"`
}

// UnmarshalJSON decodes the typed fields and keeps the others in Extra.
// createdAt and updatedAt are read in any ISO 8601 form (see times.go); one
// in no form read is left zero, the subscription kept.
func (s *Subscription) UnmarshalJSON(b []byte) error {
	type plain Subscription
	return unmarshalTimes(b, (*plain)(s), &s.Extra,
		timeField{name: "createdAt", t: &s.CreatedAt}, timeField{name: "updatedAt", t: &s.UpdatedAt})
}

// DeliveryLog is one delivery attempt in a subscription's log. Fields the
// struct does not type are kept in Extra.
type DeliveryLog struct {
	ID             string `json:"id"`
	SubscriptionID string `json:"subscriptionId"`
	EventID        string `json:"eventId"`
	EventType      string `json:"eventType"`
	Attempt        int    `json:"attempt"`
	Request        struct {
		Method  string   `json:"method"`
		URL     string   `json:"url"`
		Headers []Header `json:"headers"`
		Body    string   `json:"body"`
	} `json:"request"`
	Response struct {
		Status int    `json:"status"` // 0 when the connection failed
		Body   string `json:"body"`
	} `json:"response"`
	Error       string          `json:"error"`
	DeliveredAt time.Time       `json:"deliveredAt,omitzero"` // zero: unread
	DurationMs  int64           `json:"durationMs"`
	Outcome     string          `json:"outcome"` // delivered, failed, retrying
	Extra       json.RawMessage `json:"-"`
}

// UnmarshalJSON decodes the typed fields and keeps the others in Extra.
// deliveredAt is read in any ISO 8601 form (see times.go); one in no form
// read is left zero, the entry kept.
func (l *DeliveryLog) UnmarshalJSON(b []byte) error {
	type plain DeliveryLog
	return unmarshalTimes(b, (*plain)(l), &l.Extra, timeField{name: "deliveredAt", t: &l.DeliveredAt})
}

func (c *Client) subscriptionInfo(op, id string) reqInfo {
	return reqInfo{iface: IfaceWebhooks, op: op, object: id, cred: credAPI}
}

// CreateSubscription creates a subscription (POST {webhooks}/subscriptions).
// The answer's SignatureKey is the only chance to learn the signing
// secret. Never retried once it may have reached the service: such a
// failure is an *UncertainError; list the subscriptions (by name) before
// trying again.
func (c *Client) CreateSubscription(ctx context.Context, r SubscriptionRequest) (*Subscription, error) {
	return c.writeSubscription(ctx, "create subscription", "", r)
}

// UpdateSubscription sends the whole of r for a subscription (POST
// {webhooks}/subscriptions/{id}): every field replaces the stored one,
// headers included (nil sends none, which clears them), so pass the
// current values of what should not change. Not retried blindly either.
func (c *Client) UpdateSubscription(ctx context.Context, id string, r SubscriptionRequest) (*Subscription, error) {
	if err := checkSegment(id); err != nil {
		return nil, fmt.Errorf("extract: webhooks update subscription: id: %w", err)
	}
	return c.writeSubscription(ctx, "update subscription", id, r)
}

func (c *Client) writeSubscription(ctx context.Context, op, id string, r SubscriptionRequest) (*Subscription, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	if r.Headers == nil {
		r.Headers = []Header{}
	}
	body, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	info := c.subscriptionInfo(op, id)
	info.method, info.body, info.contentType = http.MethodPost, body, "application/json"
	for _, h := range r.Headers {
		info.secrets = append(info.secrets, h.Value) // may hold the destination's credentials
	}
	u := under(c.webhooks, "subscriptions")
	if id != "" {
		u = under(c.webhooks, "subscriptions", id)
	}
	var s Subscription
	if err := c.getJSON(ctx, info, u, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// DeleteSubscription deletes a subscription and its whole log (DELETE
// {webhooks}/subscriptions/{id}). It is retried like a read: deleting is
// idempotent, and a 404 on a retry after an attempt that may have reached
// the service counts as done.
func (c *Client) DeleteSubscription(ctx context.Context, id string) error {
	if err := checkSegment(id); err != nil {
		return fmt.Errorf("extract: webhooks delete subscription: id: %w", err)
	}
	info := c.subscriptionInfo("delete subscription", id)
	info.method = http.MethodDelete
	return c.getJSON(ctx, info, under(c.webhooks, "subscriptions", id), nil)
}

// GetSubscription reads one subscription (GET
// {webhooks}/subscriptions/{id}).
func (c *Client) GetSubscription(ctx context.Context, id string) (*Subscription, error) {
	if err := checkSegment(id); err != nil {
		return nil, fmt.Errorf("extract: webhooks get subscription: id: %w", err)
	}
	var s Subscription
	if err := c.getJSON(ctx, c.subscriptionInfo("get subscription", id), under(c.webhooks, "subscriptions", id), &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Subscriptions reads every subscription (GET {webhooks}/subscriptions),
// paging by offset with the integrity rules and healing of ReadList.
func (c *Client) Subscriptions(ctx context.Context) ([]Subscription, error) {
	p, err := c.listPager(SubscriptionList(), CollectionQuery{})
	if err != nil {
		return nil, err
	}
	out, _, err := collectAll[Subscription](ctx, p, decodeCountItems)
	return out, err
}

// SubscriptionLogs reads the whole delivery log of a subscription (GET
// {webhooks}/subscriptions/{id}/logs), newest first, with the integrity
// rules and healing of ReadList. New deliveries during the read
// shift the pages; the read then starts over (or fails with an
// *IntegrityError) rather than return a duplicate or miss an entry.
func (c *Client) SubscriptionLogs(ctx context.Context, id string) ([]DeliveryLog, error) {
	if id == "" {
		return nil, errors.New("extract: webhooks subscription logs: empty id")
	}
	p, err := c.listPager(DeliveryLogList(id), CollectionQuery{})
	if err != nil {
		return nil, err
	}
	out, _, err := collectAll[DeliveryLog](ctx, p, decodeCountItems)
	return out, err
}
