package main

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// simulateDefault runs every strategy against the default herd.
func simulateDefault(t *testing.T) map[string]Result {
	t.Helper()
	results, err := simulateAll(DefaultConfig())
	if err != nil {
		t.Fatalf("simulateAll: %v", err)
	}
	byName := map[string]Result{}
	for _, r := range results {
		byName[r.Strategy] = r
	}
	return byName
}

func TestSimulateIsDeterministicForASeed(t *testing.T) {
	t.Parallel()
	c := DefaultConfig()
	other := c
	other.Seed = c.Seed + 1
	for _, s := range Strategies() {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			first, err := Simulate(c, s)
			if err != nil {
				t.Fatalf("Simulate: %v", err)
			}
			again, err := Simulate(c, s)
			if err != nil {
				t.Fatalf("Simulate: %v", err)
			}
			if diff := cmp.Diff(first, again); diff != "" {
				t.Errorf("same seed, different results (-first +again):\n%s", diff)
			}
			if first.Calls == 0 || len(first.PerTick) == 0 {
				t.Errorf("Calls = %d, %d ticks; want a run that did something", first.Calls, len(first.PerTick))
			}
		})
	}
	// The seed must matter, or the check above proves nothing about it.
	full := Strategies()[2]
	a, _ := Simulate(c, full)
	b, _ := Simulate(other, full)
	if cmp.Equal(a.PerTick, b.PerTick) {
		t.Errorf("%s: seeds %d and %d gave the same calls per tick", full.Name, c.Seed, other.Seed)
	}
}

func TestNoJitterPeaksFarAboveFullJitter(t *testing.T) {
	t.Parallel()
	r := simulateDefault(t)
	full := r["full jitter"].Peak
	if full == 0 {
		t.Fatal("full jitter: no calls once the service was up")
	}
	for _, name := range []string{"fixed, no jitter", "exponential, no jitter"} {
		if got := r[name].Peak; got < 10*full {
			t.Errorf("%s: peak %d calls per tick once up, want at least 10 times full jitter's %d", name, got, full)
		}
	}
	// A herd is what the service sees when it comes back: every client
	// without jitter calls in the same tick.
	if got, want := r["fixed, no jitter"].Peak, DefaultConfig().Clients; got != want {
		t.Errorf("fixed, no jitter: peak %d, want every client (%d) in one tick", got, want)
	}
}

func TestEveryStrategyServesEveryClientOrCountsIt(t *testing.T) {
	t.Parallel()
	c := DefaultConfig()
	for name, r := range simulateDefault(t) {
		if got := r.Served + r.GaveUp + r.Unserved; got != c.Clients {
			t.Errorf("%s: served %d + gave up %d + unserved %d = %d, want %d clients",
				name, r.Served, r.GaveUp, r.Unserved, got, c.Clients)
		}
		if r.Calls != r.Served+r.Rejected {
			t.Errorf("%s: %d calls, want served %d + rejected %d", name, r.Calls, r.Served, r.Rejected)
		}
		sum := 0
		for _, n := range r.PerTick {
			sum += n
		}
		if sum != r.Calls {
			t.Errorf("%s: calls per tick add up to %d, want %d", name, sum, r.Calls)
		}
		if name == "full jitter + budget" {
			if r.GaveUp == 0 {
				t.Errorf("%s: no client gave up in a 5 s outage; the budget refused nothing", name)
			}
			continue
		}
		if r.Served != c.Clients || r.LastServed < c.Down {
			t.Errorf("%s: served %d by %s, want all %d, after the %s outage", name, r.Served, r.LastServed, c.Clients, c.Down)
		}
	}
}

func TestBudgetSendsFewerCallsThanFullJitter(t *testing.T) {
	t.Parallel()
	r := simulateDefault(t)
	budget, full := r["full jitter + budget"], r["full jitter"]
	if budget.Calls >= full.Calls {
		t.Errorf("full jitter + budget sent %d calls, want fewer than full jitter's %d", budget.Calls, full.Calls)
	}
}

func TestServedWithinCapacity(t *testing.T) {
	t.Parallel()
	c := DefaultConfig()
	c.Down = 0
	for _, s := range Strategies() {
		r, err := Simulate(c, s)
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		// At most Capacity clients are served per tick, so serving them
		// all takes at least Clients/Capacity ticks.
		if r.Served == c.Clients && r.LastServed < time.Duration(c.Clients/c.Capacity-1)*c.Tick {
			t.Errorf("%s: all %d served by %s, faster than capacity allows", s.Name, c.Clients, r.LastServed)
		}
	}
}

func TestSimulateRejectsBadConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change func(*Config)
	}{
		{name: "no clients", change: func(c *Config) { c.Clients = 0 }},
		{name: "no capacity", change: func(c *Config) { c.Capacity = 0 }},
		{name: "zero tick", change: func(c *Config) { c.Tick = 0 }},
		{name: "horizon below a tick", change: func(c *Config) { c.Horizon = c.Tick / 2 }},
		{name: "too many ticks", change: func(c *Config) { c.Tick = time.Nanosecond }},
		{name: "negative outage", change: func(c *Config) { c.Down = -time.Second }},
		{name: "too many clients", change: func(c *Config) { c.Clients = maxClients + 1 }},
		{name: "negative budget ratio", change: func(c *Config) { c.Budget.Ratio = -0.1 }},
		{name: "NaN budget floor", change: func(c *Config) { c.Budget.MinPerSecond = math.NaN() }},
		{name: "negative budget window", change: func(c *Config) { c.Budget.Window = -time.Second }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := DefaultConfig()
			tt.change(&c)
			if _, err := Simulate(c, Strategies()[0]); err == nil {
				t.Errorf("Simulate(%+v) = nil error, want one", c)
			}
		})
	}
}
