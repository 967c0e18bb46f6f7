package main

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"time"

	"github.com/jonboulle/clockwork"
)

// Config describes one herd: the clients, the service they call, and how
// long the simulation watches them. Time is simulated in ticks; nothing
// waits in real time.
type Config struct {
	Clients  int           // clients, each sending one request
	Arrive   time.Duration // first requests spread evenly over this; zero means all at time zero
	Capacity int           // calls the service serves per tick once it is up; the rest are rejected
	Tick     time.Duration // the length of one tick of simulated time
	Down     time.Duration // the service rejects every call sent before this
	Base     time.Duration // the backoff bound of the first retry
	Cap      time.Duration // the largest backoff bound
	Fixed    time.Duration // the delay between attempts of the fixed-delay strategy
	Horizon  time.Duration // clients still retrying at this time count as never served
	Seed     uint64        // seeds every random choice; equal seeds give equal results
	Budget   BudgetConfig  // the budget strategy's retry.Budget
}

// BudgetConfig sets the fields of the shared retry.Budget; zero fields
// take the library's defaults.
type BudgetConfig struct {
	Ratio        float64
	MinPerSecond float64
	Window       time.Duration
}

// DefaultConfig is the herd that go run . simulates: 1,000 clients, all
// sending their first request at once to a service that is down for 5 s
// and then serves 25 calls per 100 ms tick (250 per second).
func DefaultConfig() Config {
	return Config{
		Clients:  1000,
		Capacity: 25,
		Tick:     100 * time.Millisecond,
		Down:     5 * time.Second,
		Base:     100 * time.Millisecond,
		Cap:      10 * time.Second,
		Fixed:    time.Second,
		Horizon:  time.Hour,
		Seed:     1,
	}
}

// Result is what one strategy did to one herd.
type Result struct {
	Strategy   string
	Calls      int           // calls sent, first attempts and retries: the work
	Rejected   int           // calls the service rejected
	Peak       int           // the most calls sent in one tick once the service is up
	Served     int           // clients whose request was served
	GaveUp     int           // clients that stopped because the budget refused a retry
	Unserved   int           // clients still retrying at the horizon
	LastServed time.Duration // when the last served client was served
	PerTick    []int         // calls sent in each tick, from time zero until the last call
}

// NeverServed is the number of clients whose request was not served.
func (r Result) NeverServed() int { return r.GaveUp + r.Unserved }

// RejectedShare is the share of calls that the service rejected.
func (r Result) RejectedShare() float64 {
	if r.Calls == 0 {
		return 0
	}
	return float64(r.Rejected) / float64(r.Calls)
}

// Limits that keep a simulation's memory in check.
const (
	maxTicks   = 10_000_000
	maxClients = 10_000_000
)

func (c Config) validate() error {
	switch {
	case c.Clients < 1:
		return errors.New("herd: need at least one client")
	case c.Capacity < 1:
		return errors.New("herd: capacity must be at least 1 call per tick")
	case c.Tick <= 0:
		return errors.New("herd: tick must be positive")
	case c.Horizon < c.Tick:
		return errors.New("herd: horizon must be at least one tick")
	case c.Horizon/c.Tick > maxTicks:
		return fmt.Errorf("herd: horizon over tick must be at most %d ticks", maxTicks)
	case c.Clients > maxClients:
		return fmt.Errorf("herd: at most %d clients", maxClients)
	case c.Down < 0 || c.Arrive < 0 || c.Base < 0 || c.Cap < 0 || c.Fixed < 0 || c.Budget.Window < 0:
		return errors.New("herd: durations must not be negative")
	}
	for _, f := range []float64{c.Budget.Ratio, c.Budget.MinPerSecond} {
		if f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
			return errors.New("herd: budget ratio and floor must be finite and not negative")
		}
	}
	return nil
}

// herd is the state of one simulation run.
type herd struct {
	c        Config
	s        Strategy
	rng      *rand.Rand
	budget   retryBudget          // nil unless the strategy shares one
	clock    *clockwork.FakeClock // drives the budget's window
	attempts []int                // attempts made so far, per client
	prev     []time.Duration      // the previous delay, per client
	due      [][]int              // due[t] lists the clients calling in tick t
	res      Result
}

// Simulate runs strategy s against the herd c.
//
// Every client sends its first request at its arrival time and, on each
// rejection, waits the strategy's delay (at least one tick, since a
// rejection takes time to arrive) and calls again, until it is served,
// its strategy's budget refuses a retry, or the horizon is reached. In each
// tick the service serves up to Capacity of the calls sent in that tick,
// chosen at random, and rejects the rest; before Down it rejects them all.
func Simulate(c Config, s Strategy) (Result, error) {
	if err := c.validate(); err != nil {
		return Result{}, err
	}
	h := newHerd(c, s)
	ticks := int(c.Horizon / c.Tick)
	pending := c.Clients
	for t := 0; t < ticks && pending > 0; t++ {
		if t > 0 {
			h.clock.Advance(c.Tick)
		}
		pending -= h.step(t, ticks)
	}
	h.res.Unserved = pending
	h.res.PerTick = trimZeros(h.res.PerTick)
	return h.res, nil
}

func newHerd(c Config, s Strategy) *herd {
	h := &herd{
		c:        c,
		s:        s,
		rng:      rand.New(rand.NewPCG(c.Seed, nameSeed(s.Name))),
		clock:    clockwork.NewFakeClockAt(time.Unix(0, 0)),
		attempts: make([]int, c.Clients),
		prev:     make([]time.Duration, c.Clients),
		due:      make([][]int, int(c.Horizon/c.Tick)),
		res:      Result{Strategy: s.Name},
	}
	if s.Budget != nil {
		h.budget = s.Budget(c.Budget, h.clock)
	}
	for id := range c.Clients {
		h.due[h.arrivalTick(id)] = append(h.due[h.arrivalTick(id)], id)
	}
	return h
}

// arrivalTick spreads the first requests evenly over Config.Arrive.
func (h *herd) arrivalTick(id int) int {
	at := time.Duration(int64(h.c.Arrive) * int64(id) / int64(h.c.Clients))
	return min(int(at/h.c.Tick), len(h.due)-1)
}

// step plays tick t and returns how many clients finished in it: served,
// or given up.
func (h *herd) step(t, ticks int) (finished int) {
	calls := h.due[t]
	h.due[t] = nil
	h.res.PerTick = append(h.res.PerTick, len(calls))
	h.res.Calls += len(calls)
	up := time.Duration(t)*h.c.Tick >= h.c.Down
	if up {
		h.res.Peak = max(h.res.Peak, len(calls))
	}
	h.rng.Shuffle(len(calls), func(i, j int) { calls[i], calls[j] = calls[j], calls[i] })
	for i, id := range calls {
		if h.attempts[id] == 0 && h.budget != nil {
			h.budget.Deposit()
		}
		h.attempts[id]++
		if up && i < h.c.Capacity {
			h.res.Served++
			h.res.LastServed = time.Duration(t) * h.c.Tick
			finished++
			continue
		}
		h.res.Rejected++
		if h.budget != nil && !h.budget.Withdraw() {
			h.res.GaveUp++
			finished++
			continue
		}
		d := h.s.Delay(h.c, h.attempts[id], h.prev[id], h.rng.Float64)
		h.prev[id] = d
		if next := t + max(1, int(d/h.c.Tick)); next < ticks {
			h.due[next] = append(h.due[next], id)
		}
		// A retry due past the horizon leaves the client pending: it is
		// counted as unserved at the end.
	}
	return finished
}

// trimZeros drops the quiet ticks after the last call.
func trimZeros(perTick []int) []int {
	n := len(perTick)
	for n > 0 && perTick[n-1] == 0 {
		n--
	}
	return perTick[:n]
}

// nameSeed gives each strategy its own random stream, so that adding or
// reordering strategies does not change the others' results.
func nameSeed(name string) uint64 {
	f := fnv.New64a()
	f.Write([]byte(name))
	return f.Sum64()
}
