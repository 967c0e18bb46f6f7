package main

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// answer is one request's outcome as its sender saw it.
type answer struct {
	code   int
	body   string
	header http.Header
	after  time.Duration // from the start of the test
}

// send sends one request to rt and returns what came back.
func send(t *testing.T, rt http.RoundTripper, start time.Time) answer {
	t.Helper()
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, callURL, strings.NewReader(callBody))
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Errorf("RoundTrip: %v", err)
		return answer{}
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	return answer{code: resp.StatusCode, body: string(b), header: resp.Header, after: time.Since(start)}
}

// sendAll sends n requests to rt at once and returns their answers, in no
// particular order.
func sendAll(t *testing.T, rt http.RoundTripper, start time.Time, n int) []answer {
	var (
		mu  sync.Mutex
		out []answer
		wg  sync.WaitGroup
	)
	for range n {
		wg.Go(func() {
			a := send(t, rt, start)
			mu.Lock()
			out = append(out, a)
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// count returns how many answers have code, and checks that each came
// after want.
func count(t *testing.T, answers []answer, code int, want time.Duration) int {
	t.Helper()
	n := 0
	for _, a := range answers {
		if a.code != code {
			continue
		}
		n++
		if a.after != want {
			t.Errorf("a %d came after %v, want %v", code, a.after, want)
		}
	}
	return n
}

// TestServer checks the server's physics: at most C requests in service,
// each for 500 ms; Anthropic's 529 at once above C, with no Retry-After
// and no rate-limit headers; and requests admitted before C drops served
// to the end.
func TestServer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		srv := NewServer([]Phase{{3, 10 * time.Second}, {1, 10 * time.Second}}, 500*time.Millisecond, 10*time.Millisecond)

		got := sendAll(t, srv, start, 5)
		if n := count(t, got, http.StatusOK, 500*time.Millisecond); n != 3 {
			t.Errorf("%d requests served with C = 3, want 3", n)
		}
		if n := count(t, got, StatusOverloaded, 10*time.Millisecond); n != 2 {
			t.Errorf("%d requests refused with C = 3, want 2", n)
		}
		for _, a := range got {
			if a.code != StatusOverloaded {
				continue
			}
			if a.body != overloadedBody {
				t.Errorf("529 body %q, want %q", a.body, overloadedBody)
			}
			for name := range a.header {
				if name == "Retry-After" || strings.Contains(strings.ToLower(name), "ratelimit") {
					t.Errorf("529 has a %s header", name)
				}
			}
		}

		// Three admitted just before C drops to 1 are served all the same;
		// while they are in service, everything is refused.
		time.Sleep(time.Until(start.Add(9800 * time.Millisecond)))
		var wg sync.WaitGroup
		var before []answer
		wg.Go(func() { before = sendAll(t, srv, start, 3) })
		time.Sleep(200 * time.Millisecond) // to the drop
		synctest.Wait()
		if n := srv.InService(); n != 3 {
			t.Errorf("%d in service after the drop, want the 3 admitted before it", n)
		}
		if a := send(t, srv, start); a.code != StatusOverloaded {
			t.Errorf("got %d with 3 in service and C = 1, want 529", a.code)
		}
		wg.Wait()
		if n := count(t, before, http.StatusOK, 10300*time.Millisecond); n != 3 {
			t.Errorf("%d of the 3 admitted before the drop served, want 3", n)
		}
		got = sendAll(t, srv, start, 2)
		if n := count(t, got, http.StatusOK, 10800*time.Millisecond); n != 1 {
			t.Errorf("%d served with C = 1, want 1", n)
		}

		// Never more than C in service at an admission.
		attempts, services := srv.record()
		for _, s := range services {
			in := 0
			for _, o := range services {
				if o.from <= s.from && s.from < o.to {
					in++
				}
			}
			if c := srv.Capacity(start.Add(s.from)); in > c {
				t.Errorf("%d in service at %v, C = %d", in, s.from, c)
			}
		}
		if len(attempts) != 5+3+1+2 || len(services) != 3+3+1 {
			t.Errorf("recorded %d attempts and %d services, want 11 and 7", len(attempts), len(services))
		}
	})
}

// TestOracle checks the oracle semaphore: no request is refused however
// many wait, and a rise of C lets waiters in at once.
func TestOracle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		srv := NewServer([]Phase{{1, 300 * time.Millisecond}, {3, time.Minute}}, 500*time.Millisecond, 10*time.Millisecond)
		got := sendAll(t, NewOracle(srv), start, 3)
		var after []time.Duration
		for _, a := range got {
			if a.code != http.StatusOK {
				t.Errorf("got %d through the oracle, want 200", a.code)
			}
			after = append(after, a.after)
		}
		// One served from 0 to 500 ms, two from the rise at 300 ms to 800 ms.
		slices.Sort(after)
		want := []time.Duration{500 * time.Millisecond, 800 * time.Millisecond, 800 * time.Millisecond}
		if diff := cmp.Diff(want, after); diff != "" {
			t.Errorf("answered after (-want +got):\n%s", diff)
		}
	})
}
