package main

import (
	"errors"
	"math"
	"math/rand/v2"
	"time"
)

// OCCConfig is the contention model of the AWS Architecture Blog post
// "Exponential Backoff And Jitter" (Marc Brooker, 2015) and its simulator,
// aws-arch-backoff-simulator: N clients start at once and each updates one
// database row exactly once under optimistic concurrency control. A client
// reads the row's version, then writes it back conditioned on that
// version; the write fails if another client wrote in between, and the
// client backs off and starts again with a fresh read. Every message
// crosses a network whose delay is |Normal(NetMean, NetSD)|.
type OCCConfig struct {
	Clients []int         // the contention levels to run
	Runs    int           // runs averaged per level and strategy
	NetMean time.Duration // mean one-way network delay (the post: 10 ms)
	NetSD   time.Duration // its standard deviation (the post: variance 4 ms², so 2 ms)
	Base    time.Duration // backoff base (the simulator: 5 ms)
	Cap     time.Duration // backoff cap (the simulator: 2 s)
	Seed    uint64
}

// DefaultOCCConfig is the setup of the simulator behind the post: network
// delay |Normal(10 ms, 2 ms)|, backoff base 5 ms and cap 2 s, 100 runs per
// level; levels from 10 to 100 clients, as the post discusses 100.
func DefaultOCCConfig() OCCConfig {
	return OCCConfig{
		Clients: []int{10, 20, 30, 40, 50, 60, 70, 80, 90, 100},
		Runs:    100,
		NetMean: 10 * time.Millisecond,
		NetSD:   2 * time.Millisecond,
		Base:    5 * time.Millisecond,
		Cap:     2 * time.Second,
		Seed:    1,
	}
}

// OCCResult is the mean of Runs runs of one strategy at one contention level.
type OCCResult struct {
	Strategy string
	Clients  int
	Calls    float64       // conditional writes sent per run: the work
	Time     time.Duration // until the last client learned its write succeeded
}

// occStrategies are the post's strategies: none, capped exponential with
// no jitter, full, equal and decorrelated jitter. The simulator counts its
// first retry as attempt 1 with bound Base*2; retry.Backoff counts from 1
// with bound Base, so the exponential strategies get attempt+1.
func occStrategies() []Strategy {
	byName := map[string]Strategy{}
	for _, s := range Strategies() {
		byName[s.Name] = s
	}
	shift := func(s Strategy) Strategy {
		d := s.Delay
		s.Delay = func(c Config, attempt int, prev time.Duration, rnd func() float64) time.Duration {
			return d(c, attempt+1, prev, rnd)
		}
		return s
	}
	none := Strategy{Name: "no backoff", Delay: func(Config, int, time.Duration, func() float64) time.Duration { return 0 }}
	return []Strategy{
		none,
		shift(byName["exponential, no jitter"]),
		shift(byName["full jitter"]),
		shift(byName["equal jitter"]),
		byName["decorrelated jitter"],
	}
}

// RunOCC runs every strategy at every contention level of c.
func RunOCC(c OCCConfig) ([]OCCResult, error) {
	if c.Runs < 1 || len(c.Clients) == 0 || c.NetMean < 0 || c.NetSD < 0 {
		return nil, errors.New("herd: the OCC model needs runs, clients and non-negative delays")
	}
	var out []OCCResult
	for _, n := range c.Clients {
		if n < 1 {
			return nil, errors.New("herd: the OCC model needs at least one client per level")
		}
		for _, s := range occStrategies() {
			rng := rand.New(rand.NewPCG(c.Seed^uint64(n), nameSeed(s.Name)))
			var calls int
			var total time.Duration
			for range c.Runs {
				k, t := runOCC(c, s, n, rng)
				calls += k
				total += t
			}
			out = append(out, OCCResult{
				Strategy: s.Name,
				Clients:  n,
				Calls:    float64(calls) / float64(c.Runs),
				Time:     total / time.Duration(c.Runs),
			})
		}
	}
	return out, nil
}

// occEvent is a message arriving at the server or back at a client.
type occEvent struct {
	at      time.Duration
	seq     int // breaks ties in arrival order, for reproducible runs
	client  int
	kind    int // one of the occ* kinds below
	payload int // a version, or 1 for a successful write
}

const (
	occRead     = iota // a read arriving at the server
	occReadRsp         // the version arriving back at the client
	occWrite           // a conditional write arriving at the server
	occWriteRsp        // the write's outcome arriving back at the client
)

// runOCC plays one run with n clients and returns the writes sent and the
// time of the last event.
func runOCC(c OCCConfig, s Strategy, n int, rng *rand.Rand) (calls int, end time.Duration) {
	net := func() time.Duration {
		return time.Duration(math.Abs(rng.NormFloat64()*float64(c.NetSD) + float64(c.NetMean)))
	}
	bc := Config{Base: c.Base, Cap: c.Cap}
	attempts := make([]int, n)
	prev := make([]time.Duration, n)
	q := &occQueue{}
	send := func(at time.Duration, client, kind, payload int) {
		q.push(occEvent{at: at, seq: q.seq, client: client, kind: kind, payload: payload})
		q.seq++
	}
	for id := range n {
		send(net(), id, occRead, 0)
	}
	version := 0
	for q.Len() > 0 {
		e := q.pop()
		end = e.at
		switch e.kind {
		case occRead:
			send(e.at+net(), e.client, occReadRsp, version)
		case occReadRsp:
			send(e.at+net(), e.client, occWrite, e.payload)
		case occWrite:
			calls++
			ok := 0
			if e.payload == version {
				version++
				ok = 1
			}
			send(e.at+net(), e.client, occWriteRsp, ok)
		case occWriteRsp:
			if e.payload == 1 {
				continue
			}
			attempts[e.client]++
			d := s.Delay(bc, attempts[e.client], prev[e.client], rng.Float64)
			prev[e.client] = d
			send(e.at+net()+d, e.client, occRead, 0)
		}
	}
	return calls, end
}

// occQueue is a binary min-heap of events ordered by arrival time, then
// by when they were sent. It is typed, not container/heap, to spare an
// allocation per message.
type occQueue struct {
	events []occEvent
	seq    int
}

func (q *occQueue) Len() int { return len(q.events) }

func (q *occQueue) less(i, j int) bool {
	a, b := &q.events[i], &q.events[j]
	return a.at < b.at || (a.at == b.at && a.seq < b.seq)
}

func (q *occQueue) push(e occEvent) {
	q.events = append(q.events, e)
	for i := len(q.events) - 1; i > 0; {
		parent := (i - 1) / 2
		if !q.less(i, parent) {
			break
		}
		q.events[i], q.events[parent] = q.events[parent], q.events[i]
		i = parent
	}
}

func (q *occQueue) pop() occEvent {
	top := q.events[0]
	last := len(q.events) - 1
	q.events[0] = q.events[last]
	q.events = q.events[:last]
	for i := 0; ; {
		small, l, r := i, 2*i+1, 2*i+2
		if l < last && q.less(l, small) {
			small = l
		}
		if r < last && q.less(r, small) {
			small = r
		}
		if small == i {
			return top
		}
		q.events[i], q.events[small] = q.events[small], q.events[i]
		i = small
	}
}
