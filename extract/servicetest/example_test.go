package servicetest_test

import (
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/sepipe/sepipe/extract/servicetest"
)

func ExampleNewServer() {
	srv := servicetest.NewServer(servicetest.WithSeed(1), servicetest.WithUsers(10))
	defer srv.Close()

	params := `{"resultsPerPage":2,"fields":["curriculumTitle","startPercentage"],"sort":{"field":"curriculumTitle"}}`
	u := srv.URL + servicetest.BasePath + "/objects/curriculum?parameters=" +
		url.QueryEscape(base64.StdEncoding.EncodeToString([]byte(params)))
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	req.Header.Set("Authorization", "Bearer "+srv.Service.AccessToken())
	resp, err := srv.Client().Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.Status)
	fmt.Println(string(body))
	// Output:
	// 200 OK
	// {"page":1,"resultsPerPage":2,"totalResults":8,"totalPages":4,"results":[{"curriculumTitle":"Compliance Essentials","startPercentage":50},{"curriculumTitle":"Customer Success Path","startPercentage":66.7}]}
}
