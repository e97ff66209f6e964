package servicetest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sepipe/sepipe/extract/servicetest"
)

// A receiver subscribes to COURSE_COMPLETED; advancing the tenant's clock by
// a day completes a few courses, and each completion is delivered.
func ExampleService_Advance() {
	srv := servicetest.NewServer(servicetest.WithSeed(1), servicetest.WithUsers(200))
	defer srv.Close()

	var got atomic.Int64
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
	}))
	defer receiver.Close()

	body := `{"name":"lms","url":"` + receiver.URL + `","method":"POST","types":["COURSE_COMPLETED"]}`
	req, _ := http.NewRequest(http.MethodPost, srv.URL+servicetest.WebhooksPath+"/subscriptions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+srv.Service.APIToken())
	req.Header.Set("Content-Type", "application/json")
	resp, err := srv.Client().Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	var sub struct{ ID, SignatureKey string }
	json.NewDecoder(resp.Body).Decode(&sub)
	resp.Body.Close()
	fmt.Println(resp.Status, len(sub.ID), sub.SignatureKey != "")

	events := srv.Service.Advance(24 * time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv.Service.WaitDeliveries(ctx)
	fmt.Println(srv.Service.Now().Format(time.RFC3339), events, got.Load())
	// Output:
	// 201 Created 26 true
	// 2026-11-02T06:00:00Z 4 4
}
