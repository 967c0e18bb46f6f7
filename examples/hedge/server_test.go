package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// timeGet sends a GET of object n through rt at the current time and
// returns the time to its answer, its error, and the response.
func timeGet(t *testing.T, ctx context.Context, rt http.RoundTripper, n int) (time.Duration, *http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf(objectURL, n), nil)
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	resp, err := rt.RoundTrip(req)
	return time.Since(began), resp, err
}

// TestStore checks that the store's times depend on the seed, the path
// and the attempt's place only, that it stops when the context ends, and
// that it counts attempts and open bodies.
func TestStore(t *testing.T) {
	times := func(seed uint64) []time.Duration {
		var out []time.Duration
		synctest.Test(t, func(t *testing.T) {
			s := NewStore(DefaultModel(), seed)
			for _, n := range []int{1, 2, 1, 3, 1} {
				d, resp, err := timeGet(t, context.Background(), s, n)
				if err != nil {
					t.Fatal(err)
				}
				_ = resp.Body.Close()
				out = append(out, d)
			}
		})
		return out
	}
	a, b := times(1), times(1)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("two runs with seed 1 differ (-first +second):\n%s", diff)
	}
	if a[0] == a[2] || a[2] == a[4] {
		t.Errorf("the attempts at one path took %v, %v and %v; want each its own draw", a[0], a[2], a[4])
	}
	if c := times(2); cmp.Equal(a, c) {
		t.Errorf("seeds 1 and 2 drew the same times %v", a)
	}

	synctest.Test(t, func(t *testing.T) {
		s := NewStore(Model{Median: 20 * time.Millisecond, Sigma: 0, Stragglers: 1,
			StragglerMin: time.Second, StragglerMax: time.Second + 1}, 1)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		d, _, err := timeGet(t, ctx, s, 1)
		if !errors.Is(err, context.DeadlineExceeded) || d != 100*time.Millisecond {
			t.Errorf("a straggler cut at 100ms returned %v after %v, want the context's error then", err, d)
		}
		d, resp, err := timeGet(t, context.Background(), s, 2)
		if err != nil || d != time.Second {
			t.Fatalf("a straggler returned %v after %v, want a response after 1s", err, d)
		}
		if s.Attempts() != 2 || s.Open() != 1 {
			t.Errorf("attempts %d, open %d; want 2 and 1", s.Attempts(), s.Open())
		}
		if body, _ := io.ReadAll(resp.Body); string(body) != objectBody {
			t.Errorf("body %q, want %q", body, objectBody)
		}
		_ = resp.Body.Close()
		_ = resp.Body.Close()
		if s.Open() != 0 {
			t.Errorf("open %d after the body was closed twice, want 0", s.Open())
		}
	})
}

// TestQueue checks that the queue serves C at a time, first come first
// served, and serves a request whose client has gone all the same.
func TestQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := NewQueue(2, 20*time.Millisecond, 0, 1)
		var (
			mu   sync.Mutex
			took = make(map[int]time.Duration)
			wg   sync.WaitGroup
		)
		for n := range 5 {
			// The requests arrive 1 ms apart, in order; the third's
			// client gives up after 5 ms.
			time.Sleep(time.Millisecond)
			ctx, cancel := context.WithCancel(context.Background())
			if n == 2 {
				ctx, cancel = context.WithTimeout(context.Background(), 5*time.Millisecond)
			}
			wg.Go(func() {
				defer cancel()
				d, resp, err := timeGet(t, ctx, q, n)
				if err == nil {
					_ = resp.Body.Close()
				}
				mu.Lock()
				took[n] = d
				mu.Unlock()
			})
		}
		wg.Wait()
		// Arrivals at 1, 2, 3, 4 and 5 ms; two in service at a time,
		// 20 ms each: services 1-21, 2-22, 21-41 (for nobody), 22-42 and
		// 41-61 ms.
		want := map[int]time.Duration{0: 20 * time.Millisecond, 1: 20 * time.Millisecond, 2: 5 * time.Millisecond,
			3: 38 * time.Millisecond, 4: 56 * time.Millisecond}
		if diff := cmp.Diff(want, took); diff != "" {
			t.Errorf("times to headers (-want +got):\n%s", diff)
		}
		if q.Attempts() != 5 || q.Abandoned() != 1 || q.Open() != 0 {
			t.Errorf("attempts %d, abandoned %d, open %d; want 5, 1 and 0", q.Attempts(), q.Abandoned(), q.Open())
		}
	})
}
