package retry_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrytest"
)

// A Replayable that knows one API better than the method does: on GitHub,
// PUT /repos/{owner}/{repo}/contents/{path} creates a commit, so a PUT that
// may have been processed is not sent again. Every other request follows
// the default rule, retry.Idempotent.
func ExampleIdempotent() {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1)%2 == 1 { // every first send fails
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()

	ft := retrytest.NewFakeTime() // in real code: retry.Policy{}
	client := &http.Client{Transport: &retry.Transport{
		Policy: retry.Policy{Clock: ft.Clock, Sleep: ft.Sleep, Rand: ft.Rand},
		Replayable: func(req *http.Request) bool {
			if req.Method == http.MethodPut && strings.HasPrefix(req.URL.Path, "/repos/") &&
				strings.Contains(req.URL.Path, "/contents/") {
				return false
			}
			return retry.Idempotent(req)
		},
	}}

	for _, c := range []struct{ method, path string }{
		{http.MethodPut, "/repos/octo/hello/contents/README.md"},
		{http.MethodPut, "/user/starred/octo/hello"},
	} {
		requests.Store(0)
		req, _ := http.NewRequest(c.method, srv.URL+c.path, strings.NewReader("{}"))
		resp, err := client.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		fmt.Println(c.method, c.path, resp.StatusCode, "sends:", requests.Load())
	}
	// Output:
	// PUT /repos/octo/hello/contents/README.md 502 sends: 1
	// PUT /user/starred/octo/hello 200 sends: 2
}
