package retry_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

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

// An upload whose body has no GetBody, such as a file, a pipe or an SDK's
// body, is sent once, unless ReplayBuffer keeps what the Transport sent of
// it.
func ExampleTransport_replayBuffer() {
	var sends atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Printf("send %d: %q\n", sends.Add(1), body)
		if sends.Load() == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()

	ft := retrytest.NewFakeTime() // in real code: retry.Policy{}
	client := &http.Client{Transport: &retry.Transport{
		Policy:       retry.Policy{Clock: ft.Clock, Sleep: ft.Sleep, Rand: ft.Rand},
		ReplayBuffer: 8 << 20, // uploads up to 8 MiB can be sent again
	}}
	// io.NopCloser hides the reader, so the request has no GetBody.
	body := io.NopCloser(strings.NewReader("line 1\nline 2\n"))
	req, err := http.NewRequest(http.MethodPut, srv.URL+"/notes.txt", body)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.Status)
	// Output:
	// send 1: "line 1\nline 2\n"
	// send 2: "line 1\nline 2\n"
	// 201 Created
}

// GitHub answers a spent rate limit with a 403 or 429, x-ratelimit-remaining:
// 0 and the Unix time of the reset. The Transport waits for the reset when
// it fits in the Deadline, and otherwise hands the response back at once.
func ExampleTransport_rateLimit() {
	ft := retrytest.NewFakeTime() // in real code: retry.Policy{}
	var sends atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sends.Add(1) == 1 {
			reset := ft.Clock.Now().Add(2 * time.Second).Unix()
			w.Header().Set("X-Ratelimit-Remaining", "0")
			w.Header().Set("X-Ratelimit-Reset", strconv.FormatInt(reset, 10))
			w.WriteHeader(http.StatusForbidden)
			return
		}
		fmt.Fprint(w, "[]")
	}))
	defer srv.Close()

	client := &http.Client{Transport: &retry.Transport{Policy: retry.Policy{
		Clock: ft.Clock, Sleep: ft.Sleep, Rand: ft.Rand,
		OnRetry: func(e retry.Event) {
			fmt.Println("retry after", e.Err, "in", e.Delay, "hinted:", e.FromRetryAfter)
		},
	}}}
	resp, err := client.Get(srv.URL + "/repos/octo/hello/issues")
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.Status, "after", sends.Load(), "sends")
	// Output:
	// retry after retry: HTTP 403 Forbidden in 2s hinted: true
	// 200 OK after 2 sends
}
