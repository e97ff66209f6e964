package servicetest

import (
	"cmp"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The tenant's clock: Advance, the admin endpoint and the events the
// tenant's activity produces.

// AdminPath is the path prefix of the fake's own admin endpoints (not part
// of the service's interface).
const AdminPath = "/_admin"

// MaxAdvance is the largest single step of Advance and of the admin
// endpoint.
const MaxAdvance = 10 * 365 * 24 * time.Hour

// WithAutoAdvance makes the tenant live on its own: every real interval
// every, its clock advances by by (as Advance does, events included),
// until Close. Both must be positive for it to take effect.
func WithAutoAdvance(every, by time.Duration) Option {
	return func(c *config) { c.autoEvery, c.autoBy = every, by }
}

// Advance moves the tenant's clock forward by d (whole seconds; at most
// MaxAdvance; zero or negative does nothing). Users progress: rows of
// userCourseProgress whose completion falls in the advanced interval
// become Completed, with their completedDate and lastActivityDate, and
// every other clock-derived value moves with them. Each such completion is
// a COURSE_COMPLETED event, delivered in the background to the
// subscriptions that select it. Advance returns the number of events the
// interval produced, whether or not anybody is subscribed.
func (s *Service) Advance(d time.Duration) int {
	d = min(d, MaxAdvance).Truncate(time.Second)
	if d <= 0 {
		return 0
	}
	s.live.advMu.Lock()
	defer s.live.advMu.Unlock()
	old := s.snap.Load()
	next := s.tenant.at(time.Unix(old.now, 0).Add(d))
	s.snap.Store(next)
	if !s.live.subscribed(EventCourseCompleted) {
		return countCompletions(next, old.now)
	}
	done := completionsBetween(next, old.now)
	for _, c := range done {
		p := c.row
		course := &s.tenant.courses[p.course]
		s.emit(EventCourseCompleted, time.Unix(p.completed, 0), map[string]any{
			"userId":        10001 + p.user,
			"userName":      s.tenant.userName(p.user),
			"courseId":      course.id,
			"courseTitle":   course.title,
			"completedDate": isoSeconds(time.Unix(p.completed, 0)),
			"score":         p.score,
		})
	}
	return len(done)
}

type completion struct {
	index int
	row   progressRow
}

// completionsBetween returns the userCourseProgress rows of sn completed
// after the instant since (Unix seconds), by completion time then row.
func completionsBetween(sn *snapshot, since int64) []completion {
	var out []completion
	n := int(sn.t.offsets[sn.t.users])
	for i := range n {
		if p := sn.progress(i); p.completed > since {
			out = append(out, completion{i, p})
		}
	}
	slices.SortFunc(out, func(a, b completion) int {
		return cmp.Or(cmp.Compare(a.row.completed, b.row.completed), cmp.Compare(a.index, b.index))
	})
	return out
}

// countCompletions counts the rows completionsBetween would return.
func countCompletions(sn *snapshot, since int64) int {
	n, total := 0, int(sn.t.offsets[sn.t.users])
	for i := range total {
		if sn.progress(i).completed > since {
			n++
		}
	}
	return n
}

// subscribed reports whether some subscription selects typ.
func (l *live) subscribed(typ string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, sub := range l.subs {
		if slices.Contains(sub.Types, typ) {
			return true
		}
	}
	return false
}

func (l *live) autoAdvance() {
	t := time.NewTicker(l.s.cfg.autoEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			l.s.Advance(l.s.cfg.autoBy)
		case <-l.ctx.Done():
			return
		}
	}
}

// serveAdmin answers the fake's admin endpoints, authenticated by the
// developer API token:
//
//	GET|HEAD /_admin/clock           {"now": "…Z"}
//	POST     /_admin/advance?days=N  {"now": "…Z", "events": n}
//
// days may be fractional (0.5 is twelve hours); hours=N is accepted
// instead of days.
func (s *Service) serveAdmin(w http.ResponseWriter, r *http.Request) {
	var allow string
	switch strings.TrimPrefix(r.URL.Path, AdminPath) {
	case "/clock":
		allow = "GET, HEAD"
	case "/advance":
		allow = "POST"
	default:
		writeProblem(w, r, newProblem(http.StatusNotFound, "no resource at path %q", r.URL.Path))
		return
	}
	if !slices.Contains(strings.Split(allow, ", "), r.Method) {
		writeProblem(w, r, methodProblem(r.Method, allow))
		return
	}
	if p := s.authorizeAPI(r); p != nil {
		writeProblem(w, r, p)
		return
	}
	type clockBody struct {
		Now    string `json:"now"`
		Events *int   `json:"events,omitempty"`
	}
	if allow != "POST" {
		if _, err := singleQuery(r); err != nil {
			writeProblem(w, r, newProblem(http.StatusBadRequest, "%v", err))
			return
		}
		writeJSONStatus(w, r, http.StatusOK, clockBody{Now: isoSeconds(s.Now())})
		return
	}
	get, err := singleQuery(r, "days", "hours")
	if err != nil {
		writeProblem(w, r, newProblem(http.StatusBadRequest, "%v", err))
		return
	}
	days, dok := get("days")
	hours, hok := get("hours")
	unit, v := 24*time.Hour, days
	if hok {
		unit, v = time.Hour, hours
	}
	f, perr := strconv.ParseFloat(v, 64)
	if dok == hok || perr != nil || f <= 0 || time.Duration(f*float64(unit)) > MaxAdvance {
		p := newProblem(http.StatusBadRequest, "give exactly one of days or hours, a positive number up to %d days", int(MaxAdvance/(24*time.Hour)))
		p.Meta = []problemMeta{{Name: "days", Reason: p.Detail, Category: catValue}}
		writeProblem(w, r, p)
		return
	}
	n := s.Advance(time.Duration(f * float64(unit)))
	writeJSONStatus(w, r, http.StatusOK, clockBody{Now: isoSeconds(s.Now()), Events: &n})
}

// sessionTTL is how long legacy sessions live: for ever (0) unless
// WithTokenTTL is set, which expires sessions that long after they were
// created, as it expires the access token.
func (s *Service) sessionTTL() time.Duration { return s.cfg.faults.tokenTTL }
