package interop_test

import (
	"bytes"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-github/v84/github"
	"github.com/retrykit/retry"
)

// TestGitHubPostNotDuplicated: a POST without an idempotency key that may
// have been processed is never sent again, while a GET is.
func TestGitHubPostNotDuplicated(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		method      string
		fault       fault
		wantSends   int
		wantIssues  int
		wantFailure bool
	}{
		{name: "POST 502", method: "POST", fault: status(502, `{"message":"Server Error"}`), wantSends: 1, wantFailure: true},
		{name: "POST 503", method: "POST", fault: status(503, `{"message":"Server Error"}`), wantSends: 1, wantFailure: true},
		{name: "POST reset after processing", method: "POST", fault: fault{ResetAfter: true}, wantSends: 1, wantIssues: 1, wantFailure: true},
		// The server did nothing, but the client cannot know that.
		{name: "POST reset before processing", method: "POST", fault: fault{ResetBefore: true}, wantSends: 1, wantFailure: true},
		// The attempt timed out waiting for the headers: the server may be
		// processing the POST still.
		{name: "POST attempt timeout", method: "POST", fault: fault{Hang: true}, wantSends: 1, wantFailure: true},
		{name: "GET 502", method: "GET", fault: status(502, `{"message":"Server Error"}`), wantSends: 2},
		{name: "GET reset after processing", method: "GET", fault: fault{ResetAfter: true}, wantSends: 2},
		{name: "GET attempt timeout", method: "GET", fault: fault{Hang: true}, wantSends: 2},
	}
	for _, tt := range tests {
		for _, pr := range []proto{overHTTP, overH2} {
			t.Run(tt.name+"/"+string(pr), func(t *testing.T) {
				t.Parallel()
				e := newGitHubEnv(t, pr, nil, func(time.Time) []fault { return []fault{tt.fault} })
				if tt.fault.Hang {
					// Real time: the attempt timeout is a context.WithTimeout.
					// It must not end a TLS handshake on a loaded machine,
					// which would be retried as a failure to connect.
					e.r.Policy.AttemptTimeout = 2 * time.Second
				}
				err := e.call(t, tt.method)
				if (err != nil) != tt.wantFailure {
					t.Fatalf("call error = %v, want failure %v", err, tt.wantFailure)
				}
				got := e.proxy.Received()
				if len(got) != tt.wantSends {
					t.Errorf("server saw %d sends (%v), want %d", len(got), faults(got), tt.wantSends)
				}
				for i, g := range got {
					if g.Proto != pr.wire() {
						t.Errorf("send %d came over %s, want %s", i+1, g.Proto, pr.wire())
					}
				}
				if n := e.fake.created(); n != tt.wantIssues {
					t.Errorf("the fake created %d issues, want %d", n, tt.wantIssues)
				}
				if errs := e.r.retryErrs(); len(errs) != tt.wantSends-1 {
					t.Errorf("OnRetry called %d times (%q), want %d", len(errs), errs, tt.wantSends-1)
				}
				var re *retry.Error
				if errors.As(err, &re) {
					t.Errorf("a send that was not retried ended in %v, want the failure as it came", err)
				}
			})
		}
	}
}

// counts returns the fake's commits and stars.
func (g *fakeGitHub) counts() (commits, stars int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.commits, g.stars
}

// TestGitHubReplayableExcludesContents: GitHub's PUT /contents/ makes a
// commit on every send, so a Transport.Replayable excludes it and defers
// to retry.Idempotent for everything else, such as starring, whose PUT
// is idempotent in practice too.
func TestGitHubReplayableExcludesContents(t *testing.T) {
	t.Parallel()
	noContents := func(r *http.Request) bool {
		if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/contents/") {
			return false
		}
		return retry.Idempotent(r)
	}
	createFile := func(t *testing.T, c *github.Client) error {
		_, _, err := c.Repositories.CreateFile(t.Context(), "octo", "hello", "README.md",
			&github.RepositoryContentFileOptions{Message: github.Ptr("docs"), Content: []byte("# hello\n")})
		return err
	}
	star := func(t *testing.T, c *github.Client) error {
		_, err := c.Activity.Star(t.Context(), "octo", "hello")
		return err
	}
	tests := []struct {
		name        string
		replayable  func(*http.Request) bool
		call        func(*testing.T, *github.Client) error
		fault       fault
		wantSends   int
		wantCommits int
		wantStars   int
		wantFailure bool
	}{
		// The default rule retries every PUT: the file is committed twice.
		{name: "default rule, contents, reset after processing", call: createFile,
			fault: fault{ResetAfter: true}, wantSends: 2, wantCommits: 2},
		{name: "excluded, contents, reset after processing", replayable: noContents, call: createFile,
			fault: fault{ResetAfter: true}, wantSends: 1, wantCommits: 1, wantFailure: true},
		{name: "excluded, contents, 502", replayable: noContents, call: createFile,
			fault: status(502, `{"message":"Server Error"}`), wantSends: 1, wantFailure: true},
		// A rate limit proves nothing was done, whatever Replayable says.
		{name: "excluded, contents, 429", replayable: noContents, call: createFile,
			fault: status(429, secondaryLimitBody, "Retry-After", "1"), wantSends: 2, wantCommits: 1},
		{name: "excluded, star, reset after processing", replayable: noContents, call: star,
			fault: fault{ResetAfter: true}, wantSends: 2, wantStars: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			isPut := func(r *http.Request) bool { return r.Method == http.MethodPut }
			e := newGitHubEnv(t, overHTTP, isPut, func(time.Time) []fault { return []fault{tt.fault} })
			e.r.Replayable = tt.replayable
			err := tt.call(t, e.client)
			if (err != nil) != tt.wantFailure {
				t.Fatalf("call error = %v, want failure %v", err, tt.wantFailure)
			}
			got := e.proxy.Received()
			if len(got) != tt.wantSends {
				t.Errorf("server saw %d sends (%v), want %d", len(got), faults(got), tt.wantSends)
			}
			for i, g := range got {
				if !bytes.Equal(g.Body, got[0].Body) {
					t.Errorf("send %d: body %q, want the first send's %q", i+1, g.Body, got[0].Body)
				}
			}
			commits, stars := e.fake.counts()
			if diff := cmp.Diff([]int{tt.wantCommits, tt.wantStars}, []int{commits, stars}); diff != "" {
				t.Errorf("commits and stars (-want +got):\n%s", diff)
			}
		})
	}
}
