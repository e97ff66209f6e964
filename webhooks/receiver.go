package webhooks

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"golang.org/x/sync/semaphore"

	"github.com/sepipe/sepipe/service"
)

// The receiving end of webhook deliveries (section D): the service pushes
// events to a URL of ours, signed with the subscription's signatureKey.

// Headers of a webhook delivery.
const (
	// SignatureHeader carries base64(HMAC-SHA256(key, raw + "." + ts)),
	// possibly several comma-separated (valid if any matches).
	SignatureHeader = "X-Service-Signature-V1"
	// SignatureTimestampHeader carries ts, Unix seconds.
	SignatureTimestampHeader = "X-Service-Signature-Timestamp"
)

// SubscriptionParam is the query parameter of the delivery URL that names
// the subscription an event came through. The service sends no header
// naming it, so the user puts it in the subscription's URL, e.g.
// http://host:8787/events?subscription=lms-sync. For GET deliveries it is
// covered by the signature; for POST it is not (it is a label, not a
// credential).
const SubscriptionParam = "subscription"

// Receiver defaults.
const (
	// DefaultSignatureTolerance is how far a delivery's timestamp may be
	// from the receiver's clock, either way.
	DefaultSignatureTolerance = 5 * time.Minute
	// DefaultMaxDeliveryBody bounds a POST body (and a GET query).
	DefaultMaxDeliveryBody = 1 << 20
	// MaxDeliveryBodyCeiling is the largest max body a Receiver takes
	// (63 MiB): an event is spooled as one record of at most 64 MiB, its
	// id, type and subscription beside the body, and the megabyte left
	// holds them (the subscription comes from a request line, which
	// net/http bounds to 1 MiB by default).
	MaxDeliveryBodyCeiling = maxSpoolRecord - 1<<20
	// DefaultBodyBudget is the bytes of delivery bodies a Receiver holds
	// at once across all connections, by default (WithBodyBudget), or
	// four times the max body when that is more.
	DefaultBodyBudget = 64 << 20
	// bodyBudgetWait is how long a delivery waits for room in the budget
	// before it is answered 503 (the service retries 5xx).
	bodyBudgetWait = 5 * time.Second
	// bodyGrace and bodyRate set how long a delivery's body may take to
	// arrive: bodyGrace plus a second per bodyRate bytes (a 1 MiB body: 14
	// s, 63 MiB: about 4.5 minutes). A sender that is slower holds the budget no longer: its
	// delivery is answered 503 (retried), and the connection closed.
	bodyGrace = 10 * time.Second
	bodyRate  = 256 << 10
)

// DefaultSourceShare is the share of the body budget one source address
// may hold by default: a quarter of it, and at least the max body.
func DefaultSourceShare(budget, maxBody int64) int64 { return max(budget/4, maxBody) }

// CheckBodyBudget refuses a body budget (WithBodyBudget,
// ListenConfig.MaxBytesInFlight, `sepipe listen --max-bytes-in-flight`) or
// source share (WithSourceShare, --max-bytes-per-source) that would let
// one delivery or one source take all of it: the budget must hold at
// least two max bodies, and a share must be at least the max body and at
// most the budget. Its message reads after the setting's name.
func CheckBodyBudget(budget, share, maxBody int64) error {
	switch {
	case budget < 2*maxBody:
		return fmt.Errorf("%d bytes in flight: want at least twice the max body (%d bytes), so that one delivery never holds all of it", budget, 2*maxBody)
	case share < maxBody:
		return fmt.Errorf("%d bytes per source: want at least the max body (%d bytes), or no delivery of that size is ever read", share, maxBody)
	case share > budget:
		return fmt.Errorf("%d bytes per source: want at most the bytes in flight (%d)", share, budget)
	}
	return nil
}

// CheckMaxBody refuses a max body (WithMaxBody, ListenConfig.MaxBody,
// `sepipe listen --max-body`) below 1 byte or above
// MaxDeliveryBodyCeiling, naming the value and the bound; its message
// reads after the setting's name.
func CheckMaxBody(n int64) error {
	switch {
	case n < 1:
		return fmt.Errorf("max body %d bytes: want at least 1", n)
	case n > MaxDeliveryBodyCeiling:
		return fmt.Errorf("max body %d bytes: more than the ceiling of %d bytes (63 MiB): a delivery is spooled as one record of at most 64 MiB, its id, type and subscription included",
			n, int64(MaxDeliveryBodyCeiling))
	}
	return nil
}

// Sentinels of delivery verification; Receiver maps them to statuses.
var (
	// ErrBadSignature: the signature or its timestamp is missing, or no
	// signature matches any secret (401).
	ErrBadSignature = errors.New("webhooks: delivery: bad or missing signature")
	// ErrStaleDelivery: the signed timestamp is outside the tolerance,
	// in the past or in the future (400).
	ErrStaleDelivery = errors.New("webhooks: delivery: timestamp outside the accepted window")
	// ErrMalformedDelivery: the event is not a JSON event with an id and a
	// type (400).
	ErrMalformedDelivery = errors.New("webhooks: delivery: malformed event")
	// ErrBusy: the receiver holds as many delivery bytes as its budget
	// allows, or as the delivery's source may hold (503, which the
	// service retries).
	ErrBusy = errors.New("webhooks: delivery: too many delivery bytes in flight")
)

// EventSink takes accepted events. The Receiver answers 2xx only after
// Accept returned nil, so Accept must not return before ev is durable.
// duplicate reports that ev.ID was accepted before (nothing new is
// stored). An error wrapping ErrEventTooLarge (an event the sink can never
// hold) is answered 413; any other error 503, which the service retries.
// Accept is called from many goroutines at once.
type EventSink interface {
	Accept(ctx context.Context, ev *service.Event) (duplicate bool, err error)
}

// VerifySignature checks a delivery signature: sigHeader holds one or more
// comma-separated base64 HMAC-SHA256 signatures of raw + "." + ts, each
// compared in constant time with the one computed under every secret
// (several secrets allow rotation). It then checks ts (Unix seconds)
// against now within tolerance, either way. It returns nil,
// ErrBadSignature or ErrStaleDelivery.
func VerifySignature(secrets []string, raw []byte, ts, sigHeader string, now time.Time, tolerance time.Duration) error {
	ts = strings.TrimSpace(ts)
	if ts == "" || strings.TrimSpace(sigHeader) == "" || len(secrets) == 0 {
		return ErrBadSignature
	}
	var given [][]byte
	for _, s := range strings.Split(sigHeader, ",") {
		if b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s)); err == nil && len(b) == sha256.Size {
			given = append(given, b)
		}
	}
	ok := false
	for _, key := range secrets {
		if key == "" {
			continue
		}
		m := hmac.New(sha256.New, []byte(key))
		m.Write(raw)
		m.Write([]byte("."))
		m.Write([]byte(ts))
		want := m.Sum(nil)
		for _, g := range given {
			if hmac.Equal(g, want) {
				ok = true // keep going: the time taken does not say which matched
			}
		}
	}
	if !ok {
		return ErrBadSignature
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: timestamp %q is not Unix seconds", ErrStaleDelivery, ts)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w: signed %s from now (tolerance %s)", ErrStaleDelivery, d.Round(time.Second), tolerance)
	}
	return nil
}

// CheckSignatureHeaders checks what a delivery's headers say before its
// body is read: a signature header holding at least one base64
// HMAC-SHA256 (32 bytes), and a timestamp of Unix seconds within
// tolerance of now, either way. It returns nil, ErrBadSignature (no
// signature, none well formed, no timestamp) or ErrStaleDelivery (a
// timestamp that is not Unix seconds, or outside the window). A delivery
// it refuses would be refused after its body too (VerifySignature), so
// nobody who is not signing is read further.
func CheckSignatureHeaders(ts, sigHeader string, now time.Time, tolerance time.Duration) error {
	ts = strings.TrimSpace(ts)
	if ts == "" {
		return ErrBadSignature
	}
	wellFormed := false
	for s := range strings.SplitSeq(sigHeader, ",") {
		if b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s)); err == nil && len(b) == sha256.Size {
			wellFormed = true
			break
		}
	}
	if !wellFormed {
		return ErrBadSignature
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: timestamp %q is not Unix seconds", ErrStaleDelivery, quoteShort(ts))
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w: signed %s from now (tolerance %s)", ErrStaleDelivery, d.Round(time.Second), tolerance)
	}
	return nil
}

// Receiver is the http.Handler of webhook deliveries: POST with the event
// as JSON body, or GET with the event as query parameters. For each
// delivery it checks, in order: method (405), size (413), signature (401),
// timestamp window (400), event shape (400: an id and a type); then hands
// the event to the sink and answers 200 once the sink has it durably (also
// for an event id accepted before), 413 when the sink can never hold it
// (ErrEventTooLarge), or 503 when the sink fails (the service retries
// 5xx). An event time in a form it cannot read is no reason to refuse: the
// event is stored with a null time, and the reason logged (a warning
// naming the event) and given in the answer.
//
// What strangers can make it hold is bounded. The signature and timestamp
// headers are checked before a body is read (CheckSignatureHeaders): a
// delivery without a well-formed signature or with a stale timestamp is
// refused at once. A body is read only within a budget of bytes held at
// once across all connections (WithBodyBudget; its declared length, or
// the max body when it declares none, is reserved before the first byte
// is read), of which one source address may hold its share
// (WithSourceShare), so a flood from one place leaves room for the
// service's deliveries; a delivery that finds no room within 5 s, or
// whose source holds its share, is answered 503 with Retry-After. A body
// must arrive within 10 s plus a second per 256 KiB; a slower one, or one
// cut by a network fault, is answered 503 too: the service retries a
// 5xx, never a 4xx.
type Receiver struct {
	sink      EventSink
	secrets   []string
	maxBody   int64
	tolerance time.Duration
	now       func() time.Time
	log       *slog.Logger

	obs Observer // told of each delivery's outcome (sepipe's metrics)

	budget, share int64
	bodies        *semaphore.Weighted
	smu           sync.Mutex
	bySource      map[string]int64 // bytes each source address holds
}

// ReceiverOption configures a Receiver.
type ReceiverOption func(*Receiver)

// WithMaxBody bounds a delivery's body (POST) or query (GET) in bytes
// (default DefaultMaxDeliveryBody, at most MaxDeliveryBodyCeiling: see
// CheckMaxBody); larger deliveries get 413.
func WithMaxBody(n int64) ReceiverOption { return func(r *Receiver) { r.maxBody = n } }

// WithSignatureTolerance sets how far a signed timestamp may be from now
// (default DefaultSignatureTolerance).
func WithSignatureTolerance(d time.Duration) ReceiverOption {
	return func(r *Receiver) { r.tolerance = d }
}

// WithReceiverClock sets the receiver's clock (default time.Now).
func WithReceiverClock(now func() time.Time) ReceiverOption { return func(r *Receiver) { r.now = now } }

// WithReceiverLogger sets where refusals and sink failures are logged.
func WithReceiverLogger(l *slog.Logger) ReceiverOption { return func(r *Receiver) { r.log = l } }

// WithObserver has o told of each delivery's outcome.
func WithObserver(o Observer) ReceiverOption { return func(r *Receiver) { r.obs = o } }

// WithBodyBudget bounds the bytes of delivery bodies held at once across
// all connections (default DefaultBodyBudget, or four max bodies when
// that is more; at least two: CheckBodyBudget).
func WithBodyBudget(n int64) ReceiverOption { return func(r *Receiver) { r.budget = n } }

// WithSourceShare bounds the bytes of delivery bodies one source address
// holds at once (default DefaultSourceShare; at least the max body, at
// most the budget). Behind a proxy every delivery has the proxy's
// address: set it to the budget there.
func WithSourceShare(n int64) ReceiverOption { return func(r *Receiver) { r.share = n } }

// NewReceiver returns a Receiver verifying deliveries with any of secrets
// (the subscriptions' signatureKeys, as returned) and handing accepted
// events to sink. It refuses a max body CheckMaxBody refuses.
func NewReceiver(sink EventSink, secrets []string, opts ...ReceiverOption) (*Receiver, error) {
	r := &Receiver{sink: sink, maxBody: DefaultMaxDeliveryBody, tolerance: DefaultSignatureTolerance,
		now: time.Now, log: slog.New(slog.DiscardHandler), obs: NoObserver{}}
	for _, s := range secrets {
		if s = strings.TrimSpace(s); s != "" {
			r.secrets = append(r.secrets, s)
		}
	}
	for _, o := range opts {
		o(r)
	}
	switch {
	case sink == nil:
		return nil, errors.New("webhooks: receiver: nil sink")
	case len(r.secrets) == 0:
		return nil, errors.New("webhooks: receiver: no signing secret")
	case CheckMaxBody(r.maxBody) != nil:
		return nil, fmt.Errorf("webhooks: receiver: %w", CheckMaxBody(r.maxBody))
	case r.tolerance <= 0:
		return nil, fmt.Errorf("webhooks: receiver: tolerance %s: want more than 0", r.tolerance)
	}
	if r.budget == 0 {
		r.budget = max(DefaultBodyBudget, 4*r.maxBody)
	}
	if r.share == 0 {
		r.share = DefaultSourceShare(r.budget, r.maxBody)
	}
	if err := CheckBodyBudget(r.budget, r.share, r.maxBody); err != nil {
		return nil, fmt.Errorf("webhooks: receiver: %w", err)
	}
	r.bodies = semaphore.NewWeighted(r.budget)
	r.bySource = map[string]int64{}
	return r, nil
}

// ServeHTTP implements http.Handler.
func (rc *Receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var signed []byte
	switch r.Method {
	case http.MethodPost, http.MethodGet:
	default:
		w.Header().Set("Allow", "GET, POST")
		rc.refuse(w, r, http.StatusMethodNotAllowed, RefusedMethod, "method "+r.Method)
		return
	}
	ts, sigs := r.Header.Get(SignatureTimestampHeader), strings.Join(r.Header.Values(SignatureHeader), ",")
	if !rc.signedHeaders(w, r, CheckSignatureHeaders(ts, sigs, rc.now(), rc.tolerance)) {
		return
	}
	if r.Method == http.MethodPost {
		if r.ContentLength > rc.maxBody {
			rc.tooLarge(w, r)
			return
		}
		release, err := rc.reserve(r)
		if err != nil {
			rc.busy(w, r, err.Error())
			return
		}
		defer release()
		b, err := rc.readBody(w, r)
		switch {
		case errors.Is(err, errTooLarge):
			rc.tooLarge(w, r)
			return
		case err != nil:
			// Cut by its deadline or by the network: a status the service
			// retries, never a 4xx that loses the event.
			w.Header().Set("Connection", "close")
			w.Header().Set("Retry-After", "5")
			rc.refuse(w, r, http.StatusServiceUnavailable, RefusedCut, "reading body: "+err.Error())
			return
		}
		signed = b
	} else {
		if int64(len(r.URL.RawQuery)) > rc.maxBody {
			rc.refuse(w, r, http.StatusRequestEntityTooLarge, RefusedTooLarge, "query larger than the limit")
			return
		}
		signed = []byte(r.URL.RawQuery)
	}
	now := rc.now()
	if !rc.signedHeaders(w, r, VerifySignature(rc.secrets, signed, ts, sigs, now, rc.tolerance)) {
		return
	}
	var (
		ev     *service.Event
		unread string
		err    error
	)
	if r.Method == http.MethodPost {
		ev, unread, err = parseEventJSON(signed)
	} else {
		ev, unread, err = parseEventQuery(r.URL.RawQuery)
	}
	if err != nil {
		rc.refuse(w, r, http.StatusBadRequest, RefusedMalformed, err.Error())
		return
	}
	// The parameters ParseQuery could read: another parameter's bad
	// escape (a proxy's, a tracking tag's) does not lose the subscription.
	q, _ := url.ParseQuery(r.URL.RawQuery)
	ev.Subscription = q.Get(SubscriptionParam)
	// What is acknowledged must be storable: refuse, before answering 2xx,
	// text the warehouse cannot hold, so no stored event blocks the ones
	// after it.
	if err := storableText(ev); err != nil {
		rc.refuse(w, r, http.StatusBadRequest, RefusedMalformed, err.Error())
		return
	}
	ev.ReceivedAt = now.UTC()
	dup, err := rc.sink.Accept(r.Context(), ev)
	if errors.Is(err, ErrEventTooLarge) {
		rc.refuse(w, r, http.StatusRequestEntityTooLarge, RefusedTooLarge, err.Error())
		return
	}
	if err != nil {
		rc.log.Error("webhook event not stored", "id", ev.ID, "type", ev.Type, "error", err)
		rc.obs.Refused(RefusedNotStored)
		http.Error(w, "event not stored, retry later", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if dup {
		rc.obs.Delivered(OutcomeDuplicate)
		io.WriteString(w, `{"status":"duplicate"}`+"\n")
		return
	}
	rc.obs.Delivered(OutcomeAccepted)
	if unread != "" {
		// The event is kept (a 4xx would lose it: the service does not
		// retry one); the reason goes to the log and into the answer,
		// which the service's delivery log shows.
		rc.log.Warn("webhook event stored with a null time: its time was not read", "id", ev.ID, "type", ev.Type,
			"subscription", ev.Subscription, "reason", unread)
		b, _ := json.Marshal(struct {
			Status  string `json:"status"`
			Warning string `json:"warning"`
		}{"accepted", unread + "; stored with a null time, the event as sent in raw"})
		w.Write(append(b, '\n'))
		return
	}
	io.WriteString(w, `{"status":"accepted"}`+"\n")
}

// signedHeaders answers a delivery whose signature check (err) failed:
// 401 for a bad or missing signature, 400 for a stale or unreadable
// timestamp. It reports whether the check passed.
func (rc *Receiver) signedHeaders(w http.ResponseWriter, r *http.Request, err error) bool {
	switch {
	case err == nil:
		return true
	case errors.Is(err, ErrBadSignature):
		rc.refuse(w, r, http.StatusUnauthorized, RefusedSignature, "bad or missing signature")
	default:
		rc.refuse(w, r, http.StatusBadRequest, RefusedStale, err.Error())
	}
	return false
}

// errTooLarge: a body without a declared length ran past the max body.
var errTooLarge = errors.New("body larger than the limit")

// reserve takes room in the body budget for r's body: its declared
// length, or the max body when it declares none, within the share of its
// source address. It waits up to bodyBudgetWait for room, and returns the
// function that gives it back, or an error wrapping ErrBusy.
func (rc *Receiver) reserve(r *http.Request) (release func(), err error) {
	n := rc.maxBody
	if r.ContentLength >= 0 {
		n = r.ContentLength
	}
	if n == 0 {
		return func() {}, nil
	}
	src, _, splitErr := net.SplitHostPort(r.RemoteAddr)
	if splitErr != nil {
		src = r.RemoteAddr
	}
	rc.smu.Lock()
	if held := rc.bySource[src]; held+n > rc.share {
		rc.smu.Unlock()
		return nil, fmt.Errorf("%w: %s holds %d bytes of deliveries, its share is %d", ErrBusy, src, held, rc.share)
	}
	rc.bySource[src] += n
	rc.smu.Unlock()
	unshare := func() {
		rc.smu.Lock()
		if rc.bySource[src] -= n; rc.bySource[src] <= 0 {
			delete(rc.bySource, src)
		}
		rc.smu.Unlock()
	}
	ctx, cancel := context.WithTimeout(r.Context(), bodyBudgetWait)
	defer cancel()
	if err := rc.bodies.Acquire(ctx, n); err != nil {
		unshare()
		return nil, fmt.Errorf("%w: the budget of %d bytes is taken", ErrBusy, rc.budget)
	}
	return func() {
		rc.bodies.Release(n)
		unshare()
	}, nil
}

// readBody reads a POST body within its reservation and its deadline
// (bodyGrace plus a second per bodyRate bytes of the max body, or of the
// declared length): into one buffer of the declared length, or, without
// one, growing up to the max body.
func (rc *Receiver) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	size := rc.maxBody
	if r.ContentLength >= 0 {
		size = r.ContentLength
	}
	deadline := time.Now().Add(bodyGrace + time.Duration(size/bodyRate)*time.Second)
	_ = http.NewResponseController(w).SetReadDeadline(deadline)
	if r.ContentLength >= 0 {
		b := make([]byte, r.ContentLength)
		if _, err := io.ReadFull(r.Body, b); err != nil {
			return nil, err
		}
		return b, nil
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, rc.maxBody+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > rc.maxBody {
		return nil, errTooLarge
	}
	return b, nil
}

// busy answers 503 with Retry-After to a delivery the budget has no room
// for (the service retries it).
func (rc *Receiver) busy(w http.ResponseWriter, r *http.Request, why string) {
	w.Header().Set("Retry-After", "5")
	w.Header().Set("Connection", "close")
	rc.refuse(w, r, http.StatusServiceUnavailable, RefusedBusy, why)
}

// maxDrain is how much of an oversized body the receiver reads and
// discards before it answers 413: a sender that writes its whole body
// before reading the answer then gets the 413, not a connection reset
// (which it would retry for ever). Past it the connection is closed.
const maxDrain = 16 << 20

// tooLarge answers 413 to an oversized delivery after draining what the
// sender still writes (up to maxDrain), and closes the connection.
func (rc *Receiver) tooLarge(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, maxDrain))
	w.Header().Set("Connection", "close")
	rc.refuse(w, r, http.StatusRequestEntityTooLarge, RefusedTooLarge, fmt.Sprintf("body larger than the limit of %d bytes", rc.maxBody))
}

func (rc *Receiver) refuse(w http.ResponseWriter, r *http.Request, status int, reason, why string) {
	rc.obs.Refused(reason)
	rc.log.Warn("webhook delivery refused", "method", r.Method, "status", status, "reason", why,
		"remote", r.RemoteAddr)
	http.Error(w, http.StatusText(status)+": "+why, status)
}

// wireEvent is the delivery body.
type wireEvent struct {
	Type        string          `json:"type"`
	SpecVersion json.RawMessage `json:"specversion,omitempty"`
	ID          string          `json:"id"`
	Time        json.RawMessage `json:"time,omitempty"` // a string as sent; kept raw so another JSON value does not refuse the event
	Data        json.RawMessage `json:"data,omitempty"`
}

// parseEventJSON reads a POST body; unread is as wireEvent.event says.
func parseEventJSON(raw []byte) (ev *service.Event, unread string, err error) {
	var w wireEvent
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, "", fmt.Errorf("%w: %v", ErrMalformedDelivery, err)
	}
	return w.event(raw)
}

// parseEventQuery reads a GET delivery's query. The event's parameters are
// appended after the URL's own, so the last value of each one counts;
// unread is as wireEvent.event says. A bad %-escape in a parameter the
// event does not use (the URL's own) does not refuse the delivery, which
// the service does not send again; one in the last id, type or data
// refuses it (the event cannot be read), never falling back to an earlier
// value of the name (the URL's own) or to none; a time or specversion
// that cannot be decoded is kept as sent (a time then is not read).
func parseEventQuery(rawQuery string) (ev *service.Event, unread string, err error) {
	var bad error
	last := func(k string) string {
		v, ok := lastParam(rawQuery, k)
		if !ok && bad == nil && (k == "id" || k == "type" || k == "data") {
			bad = fmt.Errorf("%w: query parameter %s: bad %%-escape", ErrMalformedDelivery, k)
		}
		return v
	}
	w := wireEvent{Type: last("type"), ID: last("id")}
	d := last("data")
	if bad != nil {
		return nil, "", bad
	}
	if t := last("time"); t != "" {
		w.Time, _ = json.Marshal(t)
	}
	if v := last("specversion"); v != "" {
		if _, err := strconv.Atoi(v); err == nil {
			w.SpecVersion = json.RawMessage(v)
		} else {
			w.SpecVersion, _ = json.Marshal(v)
		}
	}
	if d != "" {
		if !json.Valid([]byte(d)) {
			return nil, "", fmt.Errorf("%w: data is not JSON", ErrMalformedDelivery)
		}
		w.Data = json.RawMessage(d)
	}
	raw, err := json.Marshal(w)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %v", ErrMalformedDelivery, err)
	}
	return w.event(raw)
}

// lastParam returns the last value of the query parameter k: decoded,
// or, when its %-escape is bad, as sent and ok false. Pairs are split at
// '&' only, as url.ParseQuery splits them (which skips a pair it cannot
// decode: an earlier one of the name would count instead).
func lastParam(rawQuery, k string) (v string, ok bool) {
	ok = true
	for pair := range strings.SplitSeq(rawQuery, "&") {
		key, val, _ := strings.Cut(pair, "=")
		if key, err := url.QueryUnescape(key); err != nil || key != k {
			continue
		}
		dec, err := url.QueryUnescape(val)
		if err != nil {
			v, ok = val, false
			continue
		}
		v, ok = dec, true
	}
	return v, ok
}

// event checks the event's id and type and reads its time in any ISO 8601
// form service.ParseTime reads. A time it cannot read (not a string, or
// in no such form), or one the spool cannot hold (outside the years 1678
// to 2262), does not refuse the event: the service does not retry a 4xx,
// so refusing would lose it. The event's Time is then zero (a null time;
// Raw keeps the value as sent) and unread says why, naming the value.
func (w wireEvent) event(raw []byte) (ev *service.Event, unread string, err error) {
	if w.ID == "" || w.Type == "" {
		return nil, "", fmt.Errorf("%w: want an id and a type", ErrMalformedDelivery)
	}
	if len(w.ID) > 256 || len(w.Type) > 256 {
		return nil, "", fmt.Errorf("%w: id or type longer than 256 bytes", ErrMalformedDelivery)
	}
	ev = &service.Event{ID: w.ID, Type: w.Type, Data: w.Data, Raw: raw}
	_ = json.Unmarshal(w.SpecVersion, &ev.SpecVersion) // 1 as sent; another form ("1.0") stays in Raw
	var s string
	switch {
	case len(w.Time) == 0, string(w.Time) == "null":
		return ev, "", nil // no time
	case json.Unmarshal(w.Time, &s) != nil:
		return ev, fmt.Sprintf("time %s is not a string", cut(string(w.Time))), nil
	case s == "":
		return ev, "", nil
	}
	t, ok := service.ParseTime(s)
	switch {
	case !ok:
		unread = fmt.Sprintf("time %s is not an ISO 8601 date-time", quoteShort(s))
	case !spoolableTime(t):
		unread = fmt.Sprintf("time %s is outside the years 1678 to 2262", quoteShort(s))
	default:
		ev.Time = t
	}
	return ev, unread, nil
}

// quoteShort quotes s for a message, cut as cut cuts it.
func quoteShort(s string) string {
	head, more := head64(s)
	return strconv.Quote(head) + more
}

// cut is s for a message, cut to its first 64 bytes: a delivery's time
// may be as long as its body.
func cut(s string) string {
	head, more := head64(s)
	return head + more
}

// head64 is s's first 64 bytes (valid UTF-8) and "..." when that left
// some out.
func head64(s string) (head, more string) {
	if len(s) > 64 {
		return strings.ToValidUTF8(s[:64], ""), "..."
	}
	return s, ""
}

// storableText reports text of an event that the warehouse cannot store:
// bytes that are not UTF-8, NUL characters, and JSON escapes of lone
// UTF-16 surrogates (DuckDB's JSON type refuses them).
func storableText(ev *service.Event) error {
	for _, f := range []struct {
		name string
		v    []byte
	}{{"id", []byte(ev.ID)}, {"type", []byte(ev.Type)}, {"subscription", []byte(ev.Subscription)}, {"event", ev.Raw}} {
		if !utf8.Valid(f.v) {
			return fmt.Errorf("the %s is not valid UTF-8", f.name)
		}
		if bytes.IndexByte(f.v, 0) >= 0 {
			return fmt.Errorf("the %s holds a NUL character", f.name)
		}
	}
	if i := loneSurrogate(ev.Raw); i >= 0 {
		return fmt.Errorf("the event's JSON holds a lone UTF-16 surrogate escape at byte %d", i)
	}
	return nil
}

// loneSurrogate returns the offset of the first \uD800-\uDFFF escape in a
// JSON text that is not a high surrogate followed by a low one, or -1.
func loneSurrogate(b []byte) int {
	hex4 := func(i int) (rune, bool) {
		if i+4 > len(b) {
			return 0, false
		}
		n, err := strconv.ParseUint(string(b[i:i+4]), 16, 16)
		return rune(n), err == nil
	}
	for i := 0; i+1 < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		if b[i+1] != 'u' {
			i++ // an escaped character, \\ included
			continue
		}
		r, ok := hex4(i + 2)
		if !ok || !utf16.IsSurrogate(r) {
			i++
			continue
		}
		if r >= 0xDC00 {
			return i
		}
		if i+7 < len(b) && b[i+6] == '\\' && b[i+7] == 'u' {
			if r2, ok := hex4(i + 8); ok && r2 >= 0xDC00 && r2 <= 0xDFFF {
				i += 11
				continue
			}
		}
		return i
	}
	return -1
}
