package retrytest_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/retrykit/retry/retrytest"
	"go.uber.org/goleak"
)

// TestMain fails the run if a server leaves a handler or a connection
// behind after its test.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// answer is what a client saw of one response.
type answer struct {
	Status int
	Header string // the X-Test header
	Body   string
	Err    string // how the request or the body read failed: "", "reset" or "error"
}

func failure(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, syscall.ECONNRESET):
		return "reset"
	}
	return "error"
}

// get sends one request through srv's client and reads the whole answer.
func get(t *testing.T, srv *retrytest.Server, ctx context.Context) answer {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		return answer{Err: failure(err)}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{Status: resp.StatusCode, Header: resp.Header.Get("X-Test"), Body: string(b), Err: failure(err)}
}

func TestStepAnswers(t *testing.T) {
	tests := []struct {
		name string
		step retrytest.Step
		want answer
	}{
		{name: "zero step", step: retrytest.Step{}, want: answer{Status: 200}},
		{name: "status, header and body", want: answer{Status: 418, Header: "yes", Body: "teapot"},
			step: retrytest.Step{Status: 418, Header: http.Header{"X-Test": {"yes"}}, Body: "teapot"}},
		{name: "Status helper", step: retrytest.Status(429, "X-Test", "2"), want: answer{Status: 429, Header: "2"}},
		{name: "reset", step: retrytest.Step{Reset: true}, want: answer{Err: "reset"}},
		{name: "reset after part of the body", step: retrytest.Step{Body: "abcdef", ResetAfter: 3},
			want: answer{Status: 200, Body: "abc", Err: "reset"}},
		{name: "func", want: answer{Status: 201, Body: "made"}, step: retrytest.Step{
			Func: func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusCreated)
				io.WriteString(w, "made")
			}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := retrytest.NewServer(t, tt.step)
			if diff := cmp.Diff(tt.want, get(t, srv, t.Context())); diff != "" {
				t.Errorf("answer (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStatusHeaderPairs(t *testing.T) {
	got := retrytest.Status(503, "Retry-After", "2", "X-Odd")
	want := retrytest.Step{Status: 503, Header: http.Header{"Retry-After": {"2"}, "X-Odd": {""}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Status (-want +got):\n%s", diff)
	}
}

func TestStepBodySize(t *testing.T) {
	t.Parallel()
	srv := retrytest.NewServer(t, retrytest.Step{Body: "head", BodySize: 1 << 20})
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 1<<20 || resp.ContentLength != 1<<20 || !strings.HasPrefix(string(b), "head") {
		t.Errorf("got %d bytes (Content-Length %d) starting %q; want 1 MiB starting \"head\"",
			len(b), resp.ContentLength, b[:min(len(b), 8)])
	}
}

func TestStepDelay(t *testing.T) {
	t.Parallel()
	srv := retrytest.NewServer(t, retrytest.Step{Delay: 100 * time.Millisecond, Body: "late"})
	start := time.Now()
	got := get(t, srv, t.Context())
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Errorf("answered after %v, want at least the 100ms delay", d)
	}
	if diff := cmp.Diff(answer{Status: 200, Body: "late"}, got); diff != "" {
		t.Errorf("answer (-want +got):\n%s", diff)
	}
}

// TestStepHangEndsWithClient: a hung step answers nothing, and the client's
// cancellation frees it (goleak checks the handler is gone).
func TestStepHangEndsWithClient(t *testing.T) {
	t.Parallel()
	srv := retrytest.NewServer(t, retrytest.Step{Hang: true}, retrytest.Step{Body: "ok"})
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if got := get(t, srv, ctx); got.Err == "" || ctx.Err() == nil {
		t.Errorf("got %+v before the client gave up, want no answer", got)
	}
	if got := get(t, srv, t.Context()); got.Body != "ok" {
		t.Errorf("next request got %+v, want the next step", got)
	}
}

func TestStepStall(t *testing.T) {
	t.Parallel()
	srv := retrytest.NewServer(t, retrytest.Step{Body: "partial", Stall: true})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, len("partial"))
	if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != "partial" {
		t.Fatalf("read %q, %v; want the body sent before the stall", buf, err)
	}
	time.AfterFunc(50*time.Millisecond, cancel)
	if rest, err := io.ReadAll(resp.Body); err == nil || len(rest) != 0 {
		t.Errorf("after the stall read %q, %v; want nothing more and an error", rest, err)
	}
}

func TestStepCloseMakesNewConnection(t *testing.T) {
	tests := []struct {
		name      string
		step      retrytest.Step
		wantConns int
	}{
		{name: "keep-alive", step: retrytest.Step{Body: "a"}, wantConns: 1},
		{name: "close", step: retrytest.Step{Body: "a", Close: true}, wantConns: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := retrytest.NewServer(t, tt.step)
			for range 3 {
				if got := get(t, srv, t.Context()); got.Body != "a" {
					t.Fatalf("got %+v", got)
				}
			}
			if n := srv.Conns(); n != tt.wantConns {
				t.Errorf("%d connections for 3 requests, want %d", n, tt.wantConns)
			}
		})
	}
}

func TestServerRecordsRequests(t *testing.T) {
	t.Parallel()
	var funcBody []byte
	srv := retrytest.NewServer(t, retrytest.Step{Func: func(w http.ResponseWriter, r *http.Request) {
		funcBody, _ = io.ReadAll(r.Body) // already read by the server
	}})
	c := srv.Client()
	if resp, err := c.Get(srv.URL + "/a"); err == nil {
		resp.Body.Close()
	}
	req, _ := http.NewRequest("POST", srv.URL+"/b", strings.NewReader(`{"x":1}`))
	req.Header.Set("Idempotency-Key", "k1")
	if resp, err := c.Do(req); err == nil {
		resp.Body.Close()
	}
	type seen struct{ Method, Path, Proto, Key, Body string }
	var got []seen
	for _, r := range srv.Received() {
		got = append(got, seen{r.Method, r.Path, r.Proto, r.Header.Get("Idempotency-Key"), string(r.Body)})
	}
	want := []seen{
		{Method: "GET", Path: "/a", Proto: "HTTP/1.1"},
		{Method: "POST", Path: "/b", Proto: "HTTP/1.1", Key: "k1", Body: `{"x":1}`},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Received (-want +got):\n%s", diff)
	}
	if n := srv.Requests(); n != 2 {
		t.Errorf("Requests = %d, want 2", n)
	}
	if len(funcBody) != 0 {
		t.Errorf("Func read %q from the request body, want it already drained", funcBody)
	}
}

func TestServerScript(t *testing.T) {
	t.Parallel()
	srv := retrytest.NewServer(t, retrytest.Status(503), retrytest.Status(502))
	var got []int
	status := func() {
		got = append(got, get(t, srv, t.Context()).Status)
	}
	status()
	status()
	status() // the last step repeats
	srv.Script(retrytest.Status(201), retrytest.Status(202))
	status()
	status()
	status()
	srv.Script() // an empty script answers 200
	status()
	if diff := cmp.Diff([]int{503, 502, 502, 201, 202, 202, 200}, got); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
}

func TestTLSServerSpeaksHTTP2(t *testing.T) {
	t.Run("client", func(t *testing.T) {
		t.Parallel()
		srv := retrytest.NewTLSServer(t)
		resp, err := srv.Client().Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.ProtoMajor != 2 {
			t.Errorf("response over %s, want HTTP/2", resp.Proto)
		}
	})
	tests := []struct {
		name string
		step retrytest.Step
		want answer
	}{
		{name: "answer", step: retrytest.Step{Body: "h2"}, want: answer{Status: 200, Body: "h2"}},
		// Over HTTP/2 the stream is reset, not the connection.
		{name: "reset", step: retrytest.Step{Reset: true}, want: answer{Err: "error"}},
		{name: "reset after part of the body", step: retrytest.Step{Body: "abcdef", ResetAfter: 3},
			want: answer{Status: 200, Body: "abc", Err: "error"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := retrytest.NewTLSServer(t, tt.step)
			if diff := cmp.Diff(tt.want, get(t, srv, t.Context())); diff != "" {
				t.Errorf("answer (-want +got):\n%s", diff)
			}
			if got := srv.Received(); len(got) != 1 || got[0].Proto != "HTTP/2.0" {
				t.Errorf("received %+v, want one HTTP/2.0 request", got)
			}
		})
	}
}
