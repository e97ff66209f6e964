package servicetest

import (
	"net/http/httptest"
	"testing"
)

// BenchmarkPage measures generating and encoding one 1000-row page of
// userCourseProgress for a 100k-user tenant, without HTTP.
func BenchmarkPage(b *testing.B) {
	sn := newTenant(1, 100_000).at(DefaultNow)
	obj := progressObject
	q, err := parseParameters(obj, []byte(`{"resultsPerPage":1000}`))
	if err != nil {
		b.Fatal(err)
	}
	total := obj.count(sn)
	pages := int64(total / 1000)
	var buf []byte
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		q.page = 1 + int64(i)%pages
		buf = appendPage(buf[:0], sn, obj, q, nil, total)
		b.SetBytes(int64(len(buf)))
	}
}

// BenchmarkServeResults measures a whole results request through the
// handler (routing, auth, parameters, page), without a network.
func BenchmarkServeResults(b *testing.B) {
	svc := New(WithUsers(100_000))
	req := httptest.NewRequest("GET", BasePath+"/objects/userCourseProgress?parameters="+b64(`{"page":7,"resultsPerPage":1000}`), nil)
	req.Header.Set("Authorization", "Bearer "+svc.AccessToken())
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		svc.ServeHTTP(w, req)
		if w.Code != 200 {
			b.Fatal(w.Code)
		}
		b.SetBytes(int64(w.Body.Len()))
	}
}
