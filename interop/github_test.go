package interop_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-github/v84/github"
	"github.com/retrykit/retry"
)

// fakeGitHub answers two endpoints of the GitHub REST API: getting the
// repository octo/hello and creating an issue in it. It counts the issues
// it created. Safe for concurrent use.
type fakeGitHub struct {
	mu      sync.Mutex // protects the fields below
	issues  []string   // the titles of the issues created, in order
	commits int        // the commits made by PUT /contents/
	stars   int        // the PUTs that starred the repository
	assets  [][]byte   // the release assets uploaded, in order
}

func (g *fakeGitHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("X-RateLimit-Limit", "5000")
	h.Set("X-RateLimit-Remaining", "4999")
	h.Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10))
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/repos/octo/hello":
		_, _ = w.Write([]byte(`{"id":1,"name":"hello","full_name":"octo/hello"}`))
	case r.Method == http.MethodPost && r.URL.Path == "/repos/octo/hello/issues":
		var req struct{ Title string }
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Title == "" {
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = w.Write([]byte(`{"message":"Validation Failed"}`))
			return
		}
		g.mu.Lock()
		g.issues = append(g.issues, req.Title)
		n := len(g.issues)
		g.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"number": n, "title": req.Title})
	case r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/repos/octo/hello/contents/"):
		// Every PUT of a file makes a commit, though PUT is idempotent
		// by its method.
		g.mu.Lock()
		g.commits++
		n := g.commits
		g.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"commit": map[string]any{"sha": fmt.Sprintf("c%039d", n)}})
	case r.Method == http.MethodPost && r.URL.Path == "/repos/octo/hello/releases/1/assets":
		data, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		g.mu.Lock()
		g.assets = append(g.assets, data)
		n := len(g.assets)
		g.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"id": n, "name": r.URL.Query().Get("name"), "size": len(data)})
	case r.Method == http.MethodPut && r.URL.Path == "/user/starred/octo/hello":
		g.mu.Lock()
		g.stars++
		g.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	default:
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"message":"Not Found"}`))
	}
}

// created returns how many issues the fake created.
func (g *fakeGitHub) created() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.issues)
}

// GitHub's words for its two kinds of limits. The secondary limit's body
// is what go-github recognises it by.
const (
	secondaryLimitBody = `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",` +
		`"documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"}`
	primaryLimitBody = `{"message":"API rate limit exceeded for user ID 1.",` +
		`"documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"}`
)

// githubEnv is a fake GitHub behind a faultProxy and a go-github client
// that sends through a retry.Transport on fake time.
type githubEnv struct {
	fake   *fakeGitHub
	proxy  *faultProxy
	r      *retrier
	client *github.Client
}

// newGitHubEnv builds the servers and the client; script applies to the
// requests match accepts (nil: all), and is built by a function of the
// fake clock's now, so that x-ratelimit-reset can be set relative to it.
func newGitHubEnv(t *testing.T, pr proto, match func(*http.Request) bool, script func(now time.Time) []fault) *githubEnv {
	t.Helper()
	e := &githubEnv{fake: new(fakeGitHub), r: newRetrier()}
	opts := pr.opts()
	opts.Match = match
	e.proxy = newFaultProxy(t, e.fake, opts, script(e.r.ft.Clock.Now())...)
	e.r.setBase(t, transportFor(e.proxy))
	e.client = github.NewClient(e.r.client())
	base, err := url.Parse(e.proxy.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	e.client.BaseURL = base
	e.client.UploadURL = base
	return e
}

// call makes the request of method: GET gets the repository, POST creates
// an issue.
func (e *githubEnv) call(t *testing.T, method string) error {
	t.Helper()
	if method == http.MethodGet {
		repo, _, err := e.client.Repositories.Get(t.Context(), "octo", "hello")
		if err == nil && repo.GetFullName() != "octo/hello" {
			t.Errorf("got repository %q, want octo/hello", repo.GetFullName())
		}
		return err
	}
	issue, _, err := e.client.Issues.Create(t.Context(), "octo", "hello", &github.IssueRequest{Title: github.Ptr("flaky test")})
	if err == nil && issue.GetNumber() != 1 {
		t.Errorf("got issue number %d, want 1", issue.GetNumber())
	}
	return err
}

// hinted returns, for every retry OnRetry reported, whether its delay was
// the server's hint.
func (r *retrier) hinted() []bool {
	var h []bool
	for {
		select {
		case e := <-r.events:
			h = append(h, e.FromRetryAfter)
		default:
			return h
		}
	}
}

// rateLimited returns the answer of a primary rate limit that resets in
// the given time from now.
func rateLimited(code int, now time.Time, in time.Duration, extra ...string) fault {
	pairs := append([]string{
		"X-RateLimit-Limit", "5000",
		"X-RateLimit-Remaining", "0",
		"X-RateLimit-Reset", strconv.FormatInt(now.Add(in).Unix(), 10),
	}, extra...)
	return status(code, primaryLimitBody, pairs...)
}

func TestGitHubRateLimits(t *testing.T) {
	t.Parallel()
	secondary := func(code int, retryAfter string) func(time.Time) []fault {
		return func(time.Time) []fault { return []fault{status(code, secondaryLimitBody, "Retry-After", retryAfter)} }
	}
	primary := func(code int, in time.Duration, extra ...string) func(time.Time) []fault {
		return func(now time.Time) []fault { return []fault{rateLimited(code, now, in, extra...)} }
	}
	hour := time.Hour
	tests := []struct {
		name       string
		method     string
		script     func(now time.Time) []fault
		wantSleeps []time.Duration
		wantHinted []bool
		wantErr    func(error) bool // nil: success, after one retry per scripted fault
	}{
		{name: "secondary 403 Retry-After, GET", method: "GET", script: secondary(403, "2"),
			wantSleeps: []time.Duration{2 * time.Second}, wantHinted: []bool{true}},
		{name: "secondary 429 Retry-After, GET", method: "GET", script: secondary(429, "3"),
			wantSleeps: []time.Duration{3 * time.Second}, wantHinted: []bool{true}},
		// A rate limit proves the request was not processed: even a POST
		// without an idempotency key is sent again.
		{name: "secondary 403 Retry-After, POST", method: "POST", script: secondary(403, "2"),
			wantSleeps: []time.Duration{2 * time.Second}, wantHinted: []bool{true}},
		{name: "secondary 429 Retry-After, POST", method: "POST", script: secondary(429, "2"),
			wantSleeps: []time.Duration{2 * time.Second}, wantHinted: []bool{true}},
		{name: "secondary 403 Retry-After 0, GET", method: "GET", script: secondary(403, "0"),
			wantSleeps: []time.Duration{500 * time.Millisecond}, wantHinted: []bool{false}},
		{name: "primary 429 reset in 2s, GET", method: "GET", script: primary(429, 2*time.Second),
			wantSleeps: []time.Duration{2 * time.Second}, wantHinted: []bool{true}},
		{name: "primary 403 reset in 2s, GET", method: "GET", script: primary(403, 2*time.Second),
			wantSleeps: []time.Duration{2 * time.Second}, wantHinted: []bool{true}},
		{name: "primary 403 reset in 2s, POST", method: "POST", script: primary(403, 2*time.Second),
			wantSleeps: []time.Duration{2 * time.Second}, wantHinted: []bool{true}},
		{name: "primary 429 reset in 50s, GET", method: "GET", script: primary(429, 50*time.Second),
			wantSleeps: []time.Duration{50 * time.Second}, wantHinted: []bool{true}},
		// Retry-After and retry-after-ms come before x-ratelimit-reset.
		{name: "primary 429 with Retry-After, GET", method: "GET", script: primary(429, 30*time.Second, "Retry-After", "1"),
			wantSleeps: []time.Duration{time.Second}, wantHinted: []bool{true}},
		{name: "primary 403 reset in the past, GET", method: "GET", script: primary(403, -time.Minute),
			wantSleeps: []time.Duration{500 * time.Millisecond}, wantHinted: []bool{false}},
		// A reset past the Deadline (60s by default): the response comes
		// back at once, and go-github makes its error of it.
		{name: "primary 429 reset in an hour, GET", method: "GET", script: primary(429, hour), wantErr: isRateLimitError},
		{name: "primary 403 reset in an hour, GET", method: "GET", script: primary(403, hour), wantErr: isRateLimitError},
		{name: "primary 403 reset in an hour, POST", method: "POST", script: primary(403, hour), wantErr: isRateLimitError},
		{name: "secondary 403 Retry-After an hour, GET", method: "GET", script: secondary(403, "3600"), wantErr: isAbuseError},
		{name: "secondary 429 Retry-After an hour, POST", method: "POST", script: secondary(429, "3600"), wantErr: isAbuseError},
		// Every other 403 is final.
		{name: "plain 403, GET", method: "GET", wantErr: isStatus(403),
			script: func(time.Time) []fault {
				return []fault{status(403, `{"message":"Resource not accessible by integration"}`)}
			}},
		{name: "403 with requests left, GET", method: "GET", wantErr: isStatus(403),
			script: func(now time.Time) []fault {
				f := rateLimited(403, now, 2*time.Second)
				f.Header.Set("X-RateLimit-Remaining", "17")
				f.Body = `{"message":"Must have admin rights to Repository."}`
				return []fault{f}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newGitHubEnv(t, overHTTP, nil, tt.script)
			err := e.call(t, tt.method)
			got := e.proxy.Received()
			wantSends := 1
			if tt.wantErr == nil {
				wantSends = 2
				if err != nil {
					t.Fatalf("call failed: %v", err)
				}
			} else if !tt.wantErr(err) {
				t.Fatalf("call error = %v (%T), not the one wanted", err, err)
			}
			if len(got) != wantSends {
				t.Errorf("server saw %d sends (%v), want %d", len(got), faults(got), wantSends)
			}
			for i, g := range got {
				if !bytes.Equal(g.Body, got[0].Body) {
					t.Errorf("send %d: body %q, want the first send's %q", i+1, g.Body, got[0].Body)
				}
			}
			if diff := cmp.Diff(tt.wantSleeps, e.r.ft.Sleeps()); diff != "" {
				t.Errorf("sleeps (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantHinted, e.r.hinted()); diff != "" {
				t.Errorf("Event.FromRetryAfter (-want +got):\n%s", diff)
			}
			wantIssues := 0
			if tt.method == http.MethodPost && tt.wantErr == nil {
				wantIssues = 1
			}
			if n := e.fake.created(); n != wantIssues {
				t.Errorf("the fake created %d issues, want %d", n, wantIssues)
			}
		})
	}
}

func isRateLimitError(err error) bool {
	var e *github.RateLimitError
	return errors.As(err, &e) && e.Rate.Remaining == 0
}

func isAbuseError(err error) bool {
	var e *github.AbuseRateLimitError
	return errors.As(err, &e)
}

func isStatus(code int) func(error) bool {
	return func(err error) bool {
		var e *github.ErrorResponse
		return errors.As(err, &e) && e.Response != nil && e.Response.StatusCode == code
	}
}

// TestGitHubRetriesRunOut: when every attempt is rate limited, the last
// response reaches go-github, body unread, and becomes its error.
func TestGitHubRetriesRunOut(t *testing.T) {
	t.Parallel()
	limited := status(429, secondaryLimitBody, "Retry-After", "1")
	e := newGitHubEnv(t, overHTTP, nil, func(time.Time) []fault {
		return []fault{limited, limited, limited, limited, limited, {}}
	})
	err := e.call(t, http.MethodPost)
	var ae *github.AbuseRateLimitError
	if !errors.As(err, &ae) || ae.GetRetryAfter() != time.Second {
		t.Fatalf("call error = %v, want go-github's AbuseRateLimitError with RetryAfter 1s", err)
	}
	if n := len(e.proxy.Received()); n != retry.DefaultMaxAttempts {
		t.Errorf("server saw %d sends, want %d", n, retry.DefaultMaxAttempts)
	}
	want := []time.Duration{time.Second, time.Second, 2 * time.Second, 4 * time.Second}
	if diff := cmp.Diff(want, e.r.ft.Sleeps()); diff != "" {
		t.Errorf("sleeps (-want +got):\n%s", diff)
	}
	if n := e.fake.created(); n != 0 {
		t.Errorf("the fake created %d issues, want 0", n)
	}
}

// TestGitHubHostileReset: whatever x-ratelimit-reset says, the client
// never sleeps past the Deadline, and a rate limit stays retryable.
func TestGitHubHostileReset(t *testing.T) {
	t.Parallel()
	resets := []string{"", "soon", "-5", "1.5e9", "99999999999999999999", "9223372036854775807",
		"-9223372036854775808", "0x10", " 1767225602", "1767225602, 1767225603"}
	for _, reset := range resets {
		t.Run(reset, func(t *testing.T) {
			t.Parallel()
			e := newGitHubEnv(t, overHTTP, nil, func(now time.Time) []fault {
				f := rateLimited(403, now, 0)
				f.Header["X-Ratelimit-Reset"] = []string{reset}
				return []fault{f}
			})
			err := e.call(t, http.MethodGet)
			if slept := e.r.ft.Slept(); slept >= retry.DefaultDeadline {
				t.Errorf("slept %v, past the Deadline", slept)
			}
			sends := len(e.proxy.Received())
			t.Logf("%d sends, sleeps %v, error %v", sends, e.r.ft.Sleeps(), err)
			switch {
			case err == nil && sends == 2:
			case isRateLimitError(err) && sends == 1:
				// A reset read as too far away: handed back at once.
				if s := e.r.ft.Sleeps(); len(s) != 0 {
					t.Errorf("handed back after sleeping %v", s)
				}
			default:
				t.Errorf("call error = %v after %d sends, want success after 2 or the rate limit after 1", err, sends)
			}
		})
	}
}
