package pace

import (
	"hash/maphash"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/retrykit/retry/internal/wire"
)

// Pacer spaces the requests of every caller that shares it so that the
// servers' rate limits are not exceeded: set it as a retry.Transport's
// Pacer. Its zero value is ready to use and learns the limits from response
// headers (see the package documentation for the headers and the model).
// Share one per API key: requests share a limit when Key gives them the
// same key.
//
// Time comes from the Policy of the Transport that waits: its Clock (nil:
// the real clock) dates the Pacer's readings, and its Sleep, when set, does
// the waiting; Transports that share a Pacer must share a clock. The
// Pacer remembers at most 1,024 keys; beyond that, a new key takes the
// place of the least recently used one with nothing in flight and no
// Retry-After running, or, when there is none, goes unpaced.
//
// A Pacer is safe for concurrent use. It must not be copied after first
// use, and its fields must not change once it is in use.
type Pacer struct {
	// Key says which requests share a limit. Nil means the request's host
	// plus a hash of its credential (the first of the Authorization,
	// x-api-key and api-key headers it has), so that two API keys on one
	// host are paced apart.
	Key func(*http.Request) string

	// Cost returns the tokens a request is expected to use, counted
	// against a token limit when the server reports one. It must not read
	// or modify the request's body. Nil means no tokens are counted: only
	// requests are paced.
	Cost func(*http.Request) int64

	// Overloaded reports whether an answer of the given status says the
	// server is overloaded: from the first such answer on, the key has a
	// limit on the requests in flight, learned from them (see the package
	// documentation). For an event stream's error event met before its
	// output, it is given the status the event stands for (529 for
	// Anthropic's overloaded_error). Nil means 503 and 529. A server whose
	// 503s say something else (a failing backend behind a balancer) is
	// better served by one that says 529 only; one that returns false
	// learns no limit.
	Overloaded func(status int) bool

	// OnWait is called before each wait the Pacer imposes, for logging
	// and metrics; Policy.OnRetry is not called for these waits. It must
	// not block for long. Nil means none; LogWaits returns one that logs.
	OnWait func(Event)

	// Store, when set, holds the buckets of every process that shares it
	// (see Store): each attempt reserves from it, and each response
	// with rate-limit headers teaches it, so that a fleet on one API key
	// paces as one. Nil means the buckets live in this Pacer alone.
	Store Store

	// StoreTimeout bounds, in real time, each call to Store; past it, or
	// on an error, the Pacer paces from its own buckets for a second.
	// Zero means DefaultStoreTimeout; negative is a configuration
	// error.
	StoreTimeout time.Duration

	// OnFallback is called with the error each time a call to Store
	// fails (an error, a timeout or an answer out of range), after the
	// Pacer has turned to its own buckets, for logging and metrics. The
	// calls of several goroutines may overlap; it must not block for
	// long. A store call cut short by its caller's deadline is no
	// failure. Nil means none.
	OnFallback func(error)

	storeOff atomic.Int64 // Unix nanoseconds, real time: until then, Store is not asked
	limited  atomic.Bool  // some key has a concurrency limit
	policies policyMemo   // the IETF RateLimit-Policy field read last

	mu   sync.Mutex                          // serializes changes to keys
	keys atomic.Pointer[map[uint64]*paceKey] // replaced whole under mu, read without a lock
	once sync.Once
	seed maphash.Seed // set once; hashes keys so that a crafted key cannot collide
}

// Event describes one wait imposed by a Pacer, for Pacer.OnWait.
type Event struct {
	Attempt    int           // the attempt about to begin after the wait, counting from 1
	Delay      time.Duration // the wait about to happen
	Host       string        // the request's host
	RetryAfter bool          // the wait honours a Retry-After that the key's server sent
	Slot       bool          // the wait is for a slot under the key's concurrency limit; Delay is then an estimate
}

// maxPacerKeys bounds the keys a Pacer remembers. A new key beyond it
// takes the place of the least recently used key that has nothing in
// flight and no Retry-After running; when there is none, it is not paced.
const maxPacerKeys = 1024

// paceKey is the state of one key.
type paceKey struct {
	mu       sync.Mutex // protects the fields below
	requests bucket
	tokens   bucket
	blocked  int64 // Unix nanoseconds: the end of a Retry-After; every caller waits for it
	inflight int   // requests granted whose response has not come
	used     int64 // Unix nanoseconds: the last reservation; the least recently used key is forgotten first
	resource string
	conc     *limiter    // the concurrency limit, from the first overload on; nil before
	limited  atomic.Bool // conc is set: read without the lock
}

// paceTicket is one attempt's dealings with a Pacer: what it reserved,
// and what to compare the server's answer with.
type paceTicket struct {
	k        *paceKey
	cost     float64
	sent     bool      // the request went out: what it took is spent
	due      [2]uint32 // the windows the request and its tokens belong to (see bucket.due)
	took     [2]bool   // the request, and its tokens, were reserved from a bucket that knew a limit
	req, tok snapshot  // taken when it went out
	marks    [2]Mark   // the Store's marks, requests and tokens, when it reserved
	store    bool      // the Store set the wait: k's buckets have no place of it

	// Its place under k's concurrency limit, when k has one.
	slot  bool          // it holds a slot
	full  bool          // the limit was full when it took it, or held it back
	held  int           // the slots held when it took its own, its own included
	since int64         // when it took it, Unix nanoseconds
	gen   uint64        // the limit's gen when it took it
	turn  chan struct{} // closed when a slot is handed to it; nil unless it waits
}

// pacerNow is nowOn in Unix nanoseconds, the Pacer's unit of time.
func pacerNow(c clockwork.Clock) int64 { return wire.Now(c).UnixNano() }

// lookup returns the state of req's key, or nil when nothing is known of it.
func (p *Pacer) lookup(req *http.Request) *paceKey {
	m := p.keys.Load()
	if m == nil {
		return nil // nothing learned at all: not even a hash to compute
	}
	return (*m)[p.hash(req)]
}

// hash returns req's key, hashed with the Pacer's seed.
func (p *Pacer) hash(req *http.Request) uint64 {
	p.once.Do(func() { p.seed = maphash.MakeSeed() })
	if p.Key != nil {
		return maphash.String(p.seed, p.Key(req))
	}
	host := wire.Host(req)
	vs, i := credential(req.Header)
	if len(vs) == 1 {
		// The common case: one hash of both parts costs less than one
		// each, and i keeps a value in one header apart from the same
		// value in another.
		return maphash.Comparable(p.seed, [2]string{host, vs[0]}) ^ i*0x9e3779b97f4a7c15
	}
	// maphash.String per part, mixed: cheaper than a maphash.Hash for
	// the few short strings here.
	sum := maphash.String(p.seed, host)
	for _, v := range vs {
		sum = (sum^i)*0x9e3779b97f4a7c15 + maphash.String(p.seed, v)
	}
	return sum
}

// credential returns the values of the first credential header h has, and
// which header it is (1 to 3), or none and 0: an API sends one of them.
// The in-process key and the store's key both come from it. The lookups
// are most of a key's cost: the common header is looked up first, the
// others only when it is absent.
func credential(h http.Header) ([]string, uint64) {
	if vs := h["Authorization"]; len(vs) > 0 {
		return vs, 1
	}
	if vs := h["X-Api-Key"]; len(vs) > 0 {
		return vs, 2
	}
	if vs := h["Api-Key"]; len(vs) > 0 {
		return vs, 3
	}
	return nil, 0
}

// reserve takes req's place in its key's queue at now and returns how long
// it must wait, and whether the wait is a Retry-After's. It fills t. room
// is the time left to the call, which a store call must not outlast; zero
// means no store call.
func (p *Pacer) reserve(t *paceTicket, req *http.Request, clock clockwork.Clock, room time.Duration) (time.Duration, bool) {
	return p.reserveKey(t, req, nil, p.storeOn() && room > 0, clock, room)
}

// reserveKey is reserve, given req's key k when the caller looked it up
// (nil: not yet) and whether to ask the store.
func (p *Pacer) reserveKey(t *paceTicket, req *http.Request, k *paceKey, store bool, clock clockwork.Clock, room time.Duration) (time.Duration, bool) {
	*t = paceTicket{}
	if store {
		if wait, hinted, ok := p.storeReserve(t, req, p.cost(req), room); ok {
			if k = p.lookup(req); k != nil && k.limited.Load() {
				wait = p.limitStored(t, k, wait, clock)
			}
			return wait, hinted
		}
	}
	if k == nil {
		if k = p.lookup(req); k == nil {
			return 0, false
		}
	}
	cost := p.cost(req)
	now := pacerNow(clock)
	k.mu.Lock()
	defer k.mu.Unlock()
	t.k, t.cost = k, cost
	k.inflight++
	k.used = now
	var wait time.Duration
	t.took = [2]bool{k.requests.kind != kindNone, cost > 0 && k.tokens.kind != kindNone}
	wait, t.due[0] = k.requests.take(1, now)
	if cost > 0 {
		var w time.Duration
		w, t.due[1] = k.tokens.take(cost, now)
		wait = max(wait, w)
	}
	return k.grant(t, wait, now)
}

// grant ends a look at t's buckets at now, whose wait they say is wait: it
// returns the wait that binds, a Retry-After's when that is longer, and
// records the request as sent when there is none and it has a slot under
// the key's concurrency limit, or needs none. k.mu is held.
func (k *paceKey) grant(t *paceTicket, wait time.Duration, now int64) (time.Duration, bool) {
	if b := time.Duration(k.blocked - now); b > wait {
		return b, true
	}
	if k.conc != nil {
		wait = max(wait, time.Duration(k.conc.cool-now))
	}
	if wait <= 0 && k.admits(t, now) {
		k.send(t, now)
	}
	return wait, false
}

// ready is called when t's wait has ended: it records the request as sent
// and returns 0, or returns how much longer it must wait, and whether that
// is a Retry-After's; force sends it whatever the buckets say. Responses
// that came during the wait may have shown that a window ends later, or
// brought a Retry-After.
func (p *Pacer) ready(t *paceTicket, clock clockwork.Clock, force bool) (time.Duration, bool) {
	k := t.k
	if k == nil {
		return 0, false
	}
	now := pacerNow(clock)
	k.mu.Lock()
	defer k.mu.Unlock()
	if force {
		if k.admits(t, now) {
			k.send(t, now)
		}
		return 0, false
	}
	var wait time.Duration
	if !t.store {
		wait = k.requests.due(t.due[0], now)
		if t.cost > 0 {
			wait = max(wait, k.tokens.due(t.due[1], now))
		}
	}
	return k.grant(t, wait, now)
}

// cost returns the tokens req is expected to use.
func (p *Pacer) cost(req *http.Request) float64 {
	if p.Cost == nil {
		return 0
	}
	return float64(max(p.Cost(req), 0))
}

// send records t's request as sent at now; k.mu is held.
func (k *paceKey) send(t *paceTicket, now int64) {
	// A bucket that learned its limit after this request reserved has
	// nothing of it to count: its queue is of the requests after.
	if t.took[0] {
		t.req = k.requests.send(1, now)
	}
	if t.took[1] {
		t.tok = k.tokens.send(t.cost, now)
	}
	if t.slot {
		t.since = now // a slot is timed from the send, not from a wait it was handed over for
	}
	t.sent = true
}

// cancel returns what t reserved, for a caller that gave up its wait at
// now: its place in the buckets, and its slot or its place in the queue
// for one.
func (p *Pacer) cancel(t *paceTicket, clock clockwork.Clock) {
	k := t.k
	if k == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.inflight--
	if t.turn != nil {
		k.conc.leave(t)
	}
	if t.slot {
		k.conc.release(t.since, pacerNow(clock), false)
	}
	if !t.sent {
		if t.took[0] {
			k.requests.untake(1)
		}
		if t.took[1] {
			k.tokens.untake(t.cost)
		}
	}
	t.k = nil
}

// release ends t's attempt without a response, or with one that teaches
// nothing, at now: its place in flight, and its slot, are freed, but what
// it reserved stays spent, since the server may have counted the request.
func (p *Pacer) release(t *paceTicket, clock clockwork.Clock) {
	if k := t.k; k != nil {
		k.mu.Lock()
		k.inflight--
		if t.slot {
			k.conc.release(t.since, pacerNow(clock), false)
		}
		k.mu.Unlock()
		t.k = nil
	}
}

// observe learns from the response to t's attempt, dated by clock; err,
// when not nil, is the error event its stream met before any output. hold,
// when positive, is the Retry-After (jittered) for which every caller of
// the key waits; room is as for reserve.
func (p *Pacer) observe(t *paceTicket, req *http.Request, resp *http.Response, err error, clock clockwork.Clock, hold, room time.Duration) {
	over := p.overloaded(resp, err)
	// limited: the answer may teach a concurrency limit, or end a slot.
	limited := over || t.slot || (p.limited.Load() && (t.k == nil || t.k.limited.Load()))
	h := resp.Header
	if len(h) == 0 && !limited {
		p.release(t, clock)
		return
	}
	now := pacerNow(clock)
	o := parseRateHeaders(h, time.Unix(0, now), &p.policies)
	teaches := !o.empty() || hold > 0 || over
	if !teaches && !limited {
		p.release(t, clock)
		return
	}
	k := t.k
	if k == nil {
		if k = p.lookup(req); k == nil {
			if !teaches {
				return
			}
			if k = p.add(req, now); k == nil {
				return
			}
		}
	}
	r := p.learn(k, t, &o, max(hold, 0), now)
	if limited || o.concurrent > 0 {
		p.limit(k, t, resp, err, over, &o, clock, now)
	}
	if p.storeOn() && room > 0 && (!o.empty() || hold > 0) {
		p.storeLearn(req, r, room)
	}
}

// learn moves k to the observation o and the Retry-After block at now,
// ends t's slot, and returns what k learned, for a store.
func (p *Pacer) learn(k *paceKey, t *paceTicket, o *rateObs, block time.Duration, now int64) Report {
	k.mu.Lock()
	defer k.mu.Unlock()
	if t.k != nil {
		k.inflight--
		t.k = nil
	}
	if o.resource != "" && o.resource != k.resource {
		// Another of GitHub's limits answered on this key: the buckets
		// describe it now, and the snapshots taken for the other are moot.
		k.resource = o.resource
		t.req = snapshot{}
	}
	var r Report
	if o.requests.kind != kindNone {
		k.requests.learn(&o.requests, t.req, now)
		r.Requests = k.requests.report(o.requests.remaining, t.marks[0], now)
	}
	if p.Cost != nil && o.tokens.kind != kindNone {
		k.tokens.learn(&o.tokens, t.tok, now)
		r.Tokens = k.tokens.report(o.tokens.remaining, t.marks[1], now)
	}
	if block > 0 {
		k.blocked = max(k.blocked, now+int64(block))
		r.Block = block
	}
	return r
}

// add returns the state of req's key, creating it at now; nil when the
// Pacer holds as many keys as it may and none can be forgotten.
func (p *Pacer) add(req *http.Request, now int64) *paceKey {
	id := p.hash(req)
	p.mu.Lock()
	defer p.mu.Unlock()
	var old map[uint64]*paceKey
	if m := p.keys.Load(); m != nil {
		old = *m
	}
	if k, ok := old[id]; ok {
		return k
	}
	var drop uint64
	if len(old) >= maxPacerKeys {
		var ok bool
		if drop, ok = leastUsedIdle(old, now); !ok {
			return nil
		}
	}
	m := make(map[uint64]*paceKey, len(old)+1)
	for id, k := range old {
		m[id] = k
	}
	delete(m, drop)
	k := &paceKey{used: now}
	m[id] = k
	p.keys.Store(&m)
	return k
}

// leastUsedIdle returns the key of m that was reserved least recently and
// has nothing in flight and no Retry-After running at now.
func leastUsedIdle(m map[uint64]*paceKey, now int64) (uint64, bool) {
	var id uint64
	found, oldest := false, int64(0)
	for i, k := range m {
		k.mu.Lock()
		idle, used := k.inflight == 0 && k.blocked <= now && (k.conc == nil || k.conc.inflight == 0), k.used
		k.mu.Unlock()
		if idle && (!found || used < oldest) {
			id, oldest, found = i, used, true
		}
	}
	return id, found
}
