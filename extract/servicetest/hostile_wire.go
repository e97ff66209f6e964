package servicetest

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The hostile wire (WithHostileWire): a tenant whose paging, sizes,
// redirects and silences are hostile, one report object per case, so a
// test can sync the whole tenant and see one stream fail while the others
// commit. The usual objects (and WithHostile's, when given) are served as
// well and behave as usual.

// A HostileCase is one hostile behaviour of the wire. Each adds the report
// object HostileCase.ObjectID, whose describe is ordinary (fields id, int,
// and name, string) and whose results requests are answered as the case
// says. Filters and sort are not applied to these objects; the projection
// is, except on HostileHugeBody.
type HostileCase string

const (
	// HostileRepeatedPage: three full pages at whatever page size is
	// asked (totalResults 3 × resultsPerPage); page 3 holds page 2's rows
	// while echoing page 3, on every read. Pages past 3 are empty.
	HostileRepeatedPage HostileCase = "repeat"
	// HostileEndlessPages: every page is full, whatever its number, and
	// page p announces totalResults (p+1) × resultsPerPage and totalPages
	// p+1: page 1 announces two pages, and each page past the total the
	// first announced is full and announces one more.
	HostileEndlessPages HostileCase = "endless"
	// HostileEndlessUntotalled: every page is full, whatever its number,
	// and no page announces totals: a client stops only at a bound of its
	// own. Not part of AllHostileCases: a client's bound may be a billion
	// rows away.
	HostileEndlessUntotalled HostileCase = "endless-untotalled"
	// HostileAbsurdTotal: page 1 (and every page) announces
	// totalResults 9 000 000 000 000 000 and the matching totalPages;
	// every page is full.
	HostileAbsurdTotal HostileCase = "absurd-total"
	// HostileHugeBody: page 1 is one row whose name is a string of 'x'
	// making the body WithHostileHugeBytes long (default
	// DefaultHostileHugeBytes), streamed without a Content-Length from a
	// small buffer (the fake never holds it); page 1 announces one row.
	HostileHugeBody HostileCase = "huge"
	// HostileRedirect: every results request is answered 302 to the same
	// path and query on another origin: another port of the host the
	// request was sent to, a listener the Service opens on the first such
	// request. The other origin counts the requests and the credentials it
	// receives (HostileWireStats); it answers 401 without an Authorization
	// header and, like a thief, a page of five rows with any bearer token.
	HostileRedirect HostileCase = "redirect"
	// HostileSilence: every results request is read, then the connection
	// is held open and nothing is ever sent (until the client closes it,
	// the Service is closed, or an hour passes).
	HostileSilence HostileCase = "silent"
	// HostileStall: every results request is answered 200 with the
	// headers and the first bytes of the page, then the connection is held
	// open and nothing more is sent (as HostileSilence).
	HostileStall HostileCase = "stall"
)

// DefaultHostileHugeBytes is the length of HostileHugeBody's body: more
// than a client's default 64 MiB response limit.
const DefaultHostileHugeBytes int64 = 96 << 20

// absurdTotal is what HostileAbsurdTotal's pages announce.
const absurdTotal int64 = 9_000_000_000_000_000

// holdMax bounds how long a held connection (HostileSilence,
// HostileStall) is kept when nobody closes it.
const holdMax = time.Hour

// AllHostileCases returns the cases WithHostileWire() serves when given
// none: every case but HostileEndlessUntotalled.
func AllHostileCases() []HostileCase {
	return []HostileCase{HostileRepeatedPage, HostileEndlessPages, HostileAbsurdTotal,
		HostileHugeBody, HostileRedirect, HostileSilence, HostileStall}
}

var knownHostileCases = append(AllHostileCases(), HostileEndlessUntotalled)

// ObjectID is the id of the report object that serves the case:
// "wire_" and the case with '-' as '_' (e.g. wire_absurd_total).
func (c HostileCase) ObjectID() string { return "wire_" + strings.ReplaceAll(string(c), "-", "_") }

// ParseHostileCases reads a comma-separated list of cases (as
// `sepipe simulate --hostile-wire` takes it); "all" means AllHostileCases.
func ParseHostileCases(list string) ([]HostileCase, error) {
	var out []HostileCase
	for name := range strings.SplitSeq(list, ",") {
		name = strings.TrimSpace(name)
		switch {
		case name == "":
			continue
		case name == "all":
			out = append(out, AllHostileCases()...)
			continue
		}
		c := HostileCase(name)
		if !slices.Contains(knownHostileCases, c) {
			names := make([]string, len(knownHostileCases))
			for i, k := range knownHostileCases {
				names[i] = string(k)
			}
			return nil, fmt.Errorf("unknown hostile wire case %q (cases: all, %s)", name, strings.Join(names, ", "))
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no hostile wire case in %q", list)
	}
	return out, nil
}

// WithHostileWire adds one report object per case (see HostileCase),
// after the usual objects; without cases, AllHostileCases. It can be
// given more than once; a case given twice is served once. Unknown cases
// are ignored.
func WithHostileWire(cases ...HostileCase) Option {
	if len(cases) == 0 {
		cases = AllHostileCases()
	}
	return func(c *config) {
		w := c.hostileWire()
		for _, hc := range cases {
			if slices.Contains(knownHostileCases, hc) && !slices.Contains(w.cases, hc) {
				w.cases = append(w.cases, hc)
			}
		}
	}
}

// WithHostileHugeBytes sets the length of HostileHugeBody's body (default
// DefaultHostileHugeBytes). Values below 1 KiB count as 1 KiB.
func WithHostileHugeBytes(n int64) Option {
	return func(c *config) { c.hostileWire().hugeBytes = max(n, 1<<10) }
}

// HostileWireStats counts what the hostile wire served.
type HostileWireStats struct {
	RepeatedPages int64 // pages served with another page's rows (HostileRepeatedPage)
	HugeBytes     int64 // bytes of HostileHugeBody bodies written to connections
	Redirects     int64 // results requests answered with a redirect to the other origin
	// OtherOrigin is the base URL of HostileRedirect's other origin, ""
	// until the first redirect opened it.
	OtherOrigin string
	// OtherOriginRequests counts the requests the other origin received;
	// OtherOriginCredentials those of them that carried a credential: an
	// Authorization or Cookie header, or one of the Service's tokens,
	// secrets or password anywhere in the URL or a header.
	OtherOriginRequests    int64
	OtherOriginCredentials int64
	Held                   int64 // connections held without (the rest of) an answer (HostileSilence, HostileStall)
}

// HostileWire returns what the hostile wire (WithHostileWire) served so
// far; all zero without it.
func (s *Service) HostileWire() HostileWireStats {
	w := s.cfg.wire
	if w == nil {
		return HostileWireStats{}
	}
	w.mu.Lock()
	origin := w.origin
	w.mu.Unlock()
	return HostileWireStats{
		RepeatedPages:          w.repeated.Load(),
		HugeBytes:              w.huge.Load(),
		Redirects:              w.redirects.Load(),
		OtherOrigin:            origin,
		OtherOriginRequests:    w.otherRequests.Load(),
		OtherOriginCredentials: w.otherCredentials.Load(),
		Held:                   w.held.Load(),
	}
}

// HostileWire returns what the server's hostile wire served so far.
func (s *Server) HostileWire() HostileWireStats { return s.Service.HostileWire() }

// hostileWire is the configuration and the state of WithHostileWire. It
// lives in config (one per Service: options run once per New).
type hostileWire struct {
	cases     []HostileCase
	hugeBytes int64

	once   sync.Once // opens the other origin
	mu     sync.Mutex
	origin string // the other origin's base URL
	port   string
	err    error

	repeated, huge, redirects, otherRequests, otherCredentials, held atomic.Int64
}

func (c *config) hostileWire() *hostileWire {
	if c.wire == nil {
		c.wire = &hostileWire{hugeBytes: DefaultHostileHugeBytes}
	}
	return c.wire
}

var wireFields = []field{
	{id: "id", displayName: "ID", typ: typeInt},
	{id: "name", displayName: "Name", typ: typeString},
}

// wireObjects holds the object of each known case.
var wireObjects = func() map[string]*object {
	m := map[string]*object{}
	for _, c := range knownHostileCases {
		m[c.ObjectID()] = newObject(c.ObjectID(), "Hostile wire: "+string(c), wireFields,
			func(*snapshot) int { return 0 }, // counts are per case and per request
			func(_ *snapshot, i int, dst []value) {
				dst[0] = vInt(int64(i) + 1)
				dst[1] = vStr("row " + strconv.Itoa(i+1))
			})
	}
	return m
}()

// wireCase returns the case obj serves, if the Service serves it.
func (s *Service) wireCase(obj *object) (HostileCase, bool) {
	if s.cfg.wire == nil {
		return "", false
	}
	for _, c := range s.cfg.wire.cases {
		if c.ObjectID() == obj.id {
			return c, true
		}
	}
	return "", false
}

// wireObjectList is the objects of the cases served, in the order given.
func (s *Service) wireObjectList() []*object {
	if s.cfg.wire == nil {
		return nil
	}
	out := make([]*object, len(s.cfg.wire.cases))
	for i, c := range s.cfg.wire.cases {
		out[i] = wireObjects[c.ObjectID()]
	}
	return out
}

// reportObject is object (faults.go) and the objects of the hostile wire.
func (s *Service) reportObject(id string) (*object, bool) {
	if o, ok := s.object(id); ok {
		return o, true
	}
	if o, ok := wireObjects[id]; ok {
		if _, served := s.wireCase(o); served {
			return o, true
		}
	}
	return nil, false
}

// serveWire answers a results request for a hostile wire object, and
// reports whether it did (false: obj is not one).
func (s *Service) serveWire(w http.ResponseWriter, r *http.Request, obj *object, q *query) bool {
	c, ok := s.wireCase(obj)
	if !ok {
		return false
	}
	hw := s.cfg.wire
	sn := s.snap.Load()
	per := int64(q.perPage)
	p := q.page
	var buf []byte
	switch c {
	case HostileRepeatedPage:
		rows := int64(0)
		first := (p - 1) * per
		if p <= 3 {
			rows = per
		}
		if p == 3 {
			first = per // page 2's rows
			hw.repeated.Add(1)
		}
		buf = appendWirePage(nil, sn, obj, q, 3*per, 3, rows, first)
	case HostileEndlessPages:
		buf = appendWirePage(nil, sn, obj, q, (p+1)*per, p+1, per, (p-1)*per)
	case HostileEndlessUntotalled:
		buf = appendWirePage(nil, sn, obj, q, -1, -1, per, (p-1)*per)
	case HostileAbsurdTotal:
		buf = appendWirePage(nil, sn, obj, q, absurdTotal, (absurdTotal+per-1)/per, per, (p-1)*per)
	case HostileHugeBody:
		if p == 1 {
			s.serveHuge(w, r, q)
			return true
		}
		buf = appendWirePage(nil, sn, obj, q, 1, 1, 0, 0)
	case HostileRedirect:
		s.redirectAway(w, r)
		return true
	case HostileSilence:
		s.hold(w, r)
		return true
	case HostileStall:
		buf = appendWirePage(nil, sn, obj, q, 5, 1, min(5, per), 0)
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Content-Length", strconv.Itoa(len(buf)))
		w.WriteHeader(http.StatusOK)
		if r.Method != http.MethodHead {
			w.Write(buf[:len(buf)/2])
		}
		http.NewResponseController(w).Flush()
		s.hold(w, r)
		return true
	}
	writeBody(w, r, buf)
	return true
}

// appendWirePage appends a results page of obj announcing total and pages
// (both left out when total < 0) and holding rows rows from row first.
func appendWirePage(dst []byte, sn *snapshot, obj *object, q *query, total, pages, rows, first int64) []byte {
	dst = append(dst, `{"page":`...)
	dst = strconv.AppendInt(dst, q.page, 10)
	dst = append(dst, `,"resultsPerPage":`...)
	dst = strconv.AppendInt(dst, int64(q.perPage), 10)
	if total >= 0 {
		dst = append(dst, `,"totalResults":`...)
		dst = strconv.AppendInt(dst, total, 10)
		dst = append(dst, `,"totalPages":`...)
		dst = strconv.AppendInt(dst, pages, 10)
	}
	dst = append(dst, `,"results":[`...)
	vals := make([]value, len(obj.fields))
	for n := range rows {
		if n > 0 {
			dst = append(dst, ',')
		}
		dst = appendRow(dst, sn, obj, q.fields, int(first+n), vals)
	}
	return append(dst, ']', '}')
}

// hugeChunk is what HostileHugeBody's string is written from.
var hugeChunk = bytes.Repeat([]byte{'x'}, 64<<10)

// serveHuge streams page 1 of HostileHugeBody: one row whose name makes
// the body hugeBytes long, with no Content-Length, from hugeChunk. It stops
// at the first failed write (the client went away).
func (s *Service) serveHuge(w http.ResponseWriter, r *http.Request, q *query) {
	hw := s.cfg.wire
	prefix := fmt.Sprintf(`{"page":1,"resultsPerPage":%d,"totalResults":1,"totalPages":1,"results":[{"id":1,"name":"`, q.perPage)
	const suffix = `"}]}`
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	write := func(b []byte) bool {
		n, err := w.Write(b)
		hw.huge.Add(int64(n))
		return err == nil
	}
	if !write([]byte(prefix)) {
		return
	}
	for left := max(hw.hugeBytes-int64(len(prefix)+len(suffix)), 0); left > 0; {
		n := min(left, int64(len(hugeChunk)))
		if !write(hugeChunk[:n]) {
			return
		}
		left -= n
	}
	write([]byte(suffix))
}

// hold keeps r's connection open without answering (more): the connection
// is taken from the server, so closing the server does not wait for it,
// and closed when the client closes it, the Service is closed, or after
// holdMax. Where the connection cannot be taken (HTTP/2, a wrapped
// writer) the handler waits instead.
func (s *Service) hold(w http.ResponseWriter, r *http.Request) {
	s.cfg.wire.held.Add(1)
	quit := s.live.ctx.Done()
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		t := time.NewTimer(holdMax)
		defer t.Stop()
		select {
		case <-r.Context().Done():
		case <-quit:
		case <-t.C:
		}
		return
	}
	go func() {
		defer conn.Close()
		gone := make(chan struct{})
		go func() { io.Copy(io.Discard, conn); close(gone) }()
		t := time.NewTimer(holdMax)
		defer t.Stop()
		select {
		case <-gone:
		case <-quit:
		case <-t.C:
		}
	}()
}

// redirectAway answers 302 to the same path and query on the other origin.
func (s *Service) redirectAway(w http.ResponseWriter, r *http.Request) {
	port, err := s.otherOrigin(r)
	if err != nil {
		http.Error(w, "hostile wire: opening the other origin: "+err.Error(), http.StatusInternalServerError)
		return
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(r.Host); err == nil {
		host = h
	}
	s.cfg.wire.redirects.Add(1)
	u := "http://" + net.JoinHostPort(host, port) + r.URL.RequestURI()
	w.Header().Set("Location", u)
	w.WriteHeader(http.StatusFound)
}

// otherOrigin opens the other origin, once: a listener on the local
// address r came in on, port chosen by the system, closed with the
// Service. It returns its port.
func (s *Service) otherOrigin(r *http.Request) (string, error) {
	hw := s.cfg.wire
	hw.once.Do(func() {
		ip := "127.0.0.1"
		if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
			if h, _, err := net.SplitHostPort(a.String()); err == nil {
				ip = h
			}
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err != nil {
			hw.mu.Lock()
			hw.err = err
			hw.mu.Unlock()
			return
		}
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		srv := &http.Server{Handler: http.HandlerFunc(s.serveOtherOrigin), ReadHeaderTimeout: 10 * time.Second}
		go srv.Serve(ln)
		go func() {
			<-s.live.ctx.Done()
			srv.Close()
		}()
		hw.mu.Lock()
		hw.origin, hw.port = "http://"+ln.Addr().String(), port
		hw.mu.Unlock()
	})
	hw.mu.Lock()
	defer hw.mu.Unlock()
	return hw.port, hw.err
}

// serveOtherOrigin is the other origin of HostileRedirect: it counts what
// it receives and, given any bearer token, answers as a thief would, with
// a page of five rows of wire_redirect.
func (s *Service) serveOtherOrigin(w http.ResponseWriter, r *http.Request) {
	hw := s.cfg.wire
	hw.otherRequests.Add(1)
	if s.carriesCredential(r) {
		hw.otherCredentials.Add(1)
	}
	if bearerToken(r) == "" {
		writeError(w, r, errUnauthorized("missing Authorization header; expected \"Bearer <access token>\""))
		return
	}
	obj := wireObjects[HostileRedirect.ObjectID()]
	q, aerr := parseQuery(obj, r.URL.RawQuery)
	if aerr != nil {
		writeError(w, r, aerr)
		return
	}
	rows := int64(0)
	if q.page == 1 {
		rows = min(5, int64(q.perPage))
	}
	writeBody(w, r, appendWirePage(nil, s.snap.Load(), obj, q, 5, (5+int64(q.perPage)-1)/int64(q.perPage), rows, 0))
}

// carriesCredential reports whether r carries an Authorization or Cookie
// header, or any credential of the Service in its URL or headers.
func (s *Service) carriesCredential(r *http.Request) bool {
	if r.Header.Get("Authorization") != "" || r.Header.Get("Cookie") != "" {
		return true
	}
	c := s.cfg
	secrets := []string{c.accessToken, c.limitedToken, c.apiToken, c.refreshToken, c.clientSecret, c.password}
	var all strings.Builder
	all.WriteString(r.URL.String())
	for k, vs := range r.Header {
		all.WriteString("\n" + k + ": " + strings.Join(vs, ", "))
	}
	for _, sec := range secrets {
		if sec != "" && strings.Contains(all.String(), sec) {
			return true
		}
	}
	return false
}
