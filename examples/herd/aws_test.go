package main

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// occAt runs the OCC model at one contention level and returns the
// results by strategy.
func occAt(t *testing.T, clients, runs int, seed uint64) map[string]OCCResult {
	t.Helper()
	c := DefaultOCCConfig()
	c.Clients, c.Runs, c.Seed = []int{clients}, runs, seed
	results, err := RunOCC(c)
	if err != nil {
		t.Fatalf("RunOCC: %v", err)
	}
	byName := map[string]OCCResult{}
	for _, r := range results {
		byName[r.Strategy] = r
	}
	return byName
}

// TestOCCReproducesThePost checks the orderings that the post reports for
// its simulation, at the 100 contending clients it discusses.
func TestOCCReproducesThePost(t *testing.T) {
	t.Parallel()
	r := occAt(t, 100, 20, 1)
	none, expo := r["no backoff"], r["exponential, no jitter"]
	full, equal, decorr := r["full jitter"], r["equal jitter"], r["decorrelated jitter"]

	// "we've reduced our call count by more than half" (full jitter
	// against un-jittered exponential backoff, 100 clients).
	if full.Calls*2 >= expo.Calls {
		t.Errorf("full jitter %.0f calls, want under half of exponential's %.0f", full.Calls, expo.Calls)
	}
	if expo.Calls >= none.Calls {
		t.Errorf("exponential %.0f calls, want fewer than no backoff's %.0f", expo.Calls, none.Calls)
	}
	// "approximately the same for Full and Equal jitter, and higher for
	// Decorrelated"; equal "does slightly more work than Full Jitter".
	if equal.Calls < full.Calls || equal.Calls > 1.1*full.Calls {
		t.Errorf("equal jitter %.0f calls, want slightly more than full jitter's %.0f", equal.Calls, full.Calls)
	}
	if decorr.Calls <= equal.Calls {
		t.Errorf("decorrelated %.0f calls, want more than full %.0f and equal %.0f", decorr.Calls, full.Calls, equal.Calls)
	}
	// No jitter "takes more time"; equal jitter "takes much longer" than
	// full; full "uses less work, but slightly more time" than decorrelated.
	if expo.Time < 5*full.Time {
		t.Errorf("exponential took %s, want far longer than full jitter's %s", expo.Time, full.Time)
	}
	if equal.Time <= full.Time || full.Time <= decorr.Time {
		t.Errorf("times: equal %s, full %s, decorrelated %s; want equal > full > decorrelated", equal.Time, full.Time, decorr.Time)
	}
}

func TestOCCIsDeterministicForASeed(t *testing.T) {
	t.Parallel()
	a, b := occAt(t, 20, 5, 7), occAt(t, 20, 5, 7)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("same seed, different results (-first +again):\n%s", diff)
	}
	if c := occAt(t, 20, 5, 8); cmp.Equal(a, c) {
		t.Error("seeds 7 and 8 gave the same results")
	}
}

func TestOCCOneClientWritesOnce(t *testing.T) {
	t.Parallel()
	for name, r := range occAt(t, 1, 3, 1) {
		// Alone, a client's first write succeeds: a read, a write and their
		// replies, four network delays of about 10 ms.
		if r.Calls != 1 || r.Time < 20*time.Millisecond || r.Time > 60*time.Millisecond {
			t.Errorf("%s: %.1f calls in %s, want 1 call in about 40ms", name, r.Calls, r.Time)
		}
	}
}

func TestRunOCCRejectsBadConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change func(*OCCConfig)
	}{
		{name: "no runs", change: func(c *OCCConfig) { c.Runs = 0 }},
		{name: "no levels", change: func(c *OCCConfig) { c.Clients = nil }},
		{name: "zero clients", change: func(c *OCCConfig) { c.Clients = []int{0} }},
		{name: "negative delay", change: func(c *OCCConfig) { c.NetMean = -time.Millisecond }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := DefaultOCCConfig()
			tt.change(&c)
			if _, err := RunOCC(c); err == nil {
				t.Errorf("RunOCC(%+v) = nil error, want one", c)
			}
		})
	}
}

func TestOCCQueuePopsInArrivalOrder(t *testing.T) {
	t.Parallel()
	q := &occQueue{}
	ats := []time.Duration{5, 1, 4, 1, 3, 9, 0, 2, 2, 7}
	for i, at := range ats {
		q.push(occEvent{at: at, seq: i})
	}
	var got []occEvent
	for q.Len() > 0 {
		got = append(got, q.pop())
	}
	want := []occEvent{
		{at: 0, seq: 6}, {at: 1, seq: 1}, {at: 1, seq: 3}, {at: 2, seq: 7}, {at: 2, seq: 8},
		{at: 3, seq: 4}, {at: 4, seq: 2}, {at: 5, seq: 0}, {at: 7, seq: 9}, {at: 9, seq: 5},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(occEvent{})); diff != "" {
		t.Errorf("pop order (-want +got):\n%s", diff)
	}
}
