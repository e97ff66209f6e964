package servicetest

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// Handlers of the Coach reporting interface (section B).

type objectEntry struct {
	ID          string     `json:"id"`
	DisplayName string     `json:"displayName"`
	URLs        objectURLs `json:"urls"`
}

type objectURLs struct {
	Describe string `json:"describe"`
	Object   string `json:"object"`
}

type fieldEntry struct {
	ID          string   `json:"id"`
	DisplayName string   `json:"displayName"`
	Type        string   `json:"type"`
	Options     []string `json:"options,omitempty"`
}

// serveReporting routes a request under BasePath. The order of checks is:
// path (404), method (405), authentication (401, 403), object (404),
// query parameters (400).
func (s *Service) serveReporting(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, BasePath)
	const (
		list = iota + 1
		describe
		results
	)
	kind, id := 0, ""
	if rest == "/objects" {
		kind = list
	} else if tail, ok := strings.CutPrefix(rest, "/objects/"); ok && tail != "" {
		if obj, ok := strings.CutSuffix(tail, "/describe"); ok && obj != "" && !strings.Contains(obj, "/") {
			kind, id = describe, obj
		} else if !strings.Contains(tail, "/") {
			kind, id = results, tail
			s.countQuery(id)
		}
	}
	if kind == 0 {
		writeError(w, r, errNotFound("no resource at path %q", r.URL.Path))
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		writeError(w, r, errMethod(r.Method))
		return
	}
	if err := s.authorize(r); err != nil {
		writeError(w, r, err)
		return
	}
	var obj *object
	if kind != list {
		var ok bool
		if obj, ok = s.reportObject(id); !ok { // drifted under WithSchemaDrift (faults.go)
			writeError(w, r, errNotFound("unknown report object %q", id))
			return
		}
	}
	if kind != results && r.URL.RawQuery != "" {
		writeError(w, r, errUnexpected("this endpoint takes no query parameters, got %q", r.URL.RawQuery))
		return
	}
	switch kind {
	case list:
		list := s.objectList()
		entries := make([]objectEntry, len(list))
		for i, o := range list {
			p := BasePath + "/objects/" + o.id
			entries[i] = objectEntry{ID: o.id, DisplayName: o.displayName,
				URLs: objectURLs{Describe: p + "/describe", Object: p}}
		}
		writeJSON(w, r, struct {
			Objects []objectEntry `json:"objects"`
		}{entries})
	case describe:
		entries := make([]fieldEntry, len(obj.fields))
		for i, f := range obj.fields {
			entries[i] = fieldEntry{ID: f.id, DisplayName: f.displayName, Type: f.typ.String(), Options: f.options}
		}
		writeJSON(w, r, struct {
			Fields []fieldEntry `json:"fields"`
		}{entries})
	case results:
		s.serveResults(w, r, obj)
	}
}

func writeJSON(w http.ResponseWriter, r *http.Request, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeBody(w, r, b)
}

func writeBody(w http.ResponseWriter, r *http.Request, b []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(b)
	}
}

var pageBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

func (s *Service) serveResults(w http.ResponseWriter, r *http.Request, obj *object) {
	q, err := parseQuery(obj, r.URL.RawQuery)
	if err != nil {
		writeError(w, r, err)
		return
	}
	if s.serveWire(w, r, obj, q) { // WithHostileWire (hostile_wire.go)
		return
	}
	sn := s.snap.Load()
	rows, total := s.matching(sn, obj, q)
	bp := pageBuffers.Get().(*[]byte)
	var buf []byte
	if ex := s.pageDrift(obj, total); ex != nil { // WithPageDrift (faults.go)
		buf = appendDriftPage((*bp)[:0], sn, obj, q, rows, total, ex)
	} else {
		buf = appendPage((*bp)[:0], sn, obj, q, rows, total)
	}
	writeBody(w, r, buf)
	if cap(buf) <= 4<<20 { // do not pin unusually large buffers
		*bp = buf
		pageBuffers.Put(bp)
	}
}
