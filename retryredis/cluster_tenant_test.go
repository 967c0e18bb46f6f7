package retryredis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/pace"
)

// The calls of the cluster tests: tenants, each a service called through a
// retry.Transport whose Budget and Pacer keep their state on one master.
const (
	// clusterStoreTimeout is the StoreTimeout of the tenants' Budgets and
	// Pacers. The 50 ms default can be missed on a machine loaded by the
	// race detector, and a fallback while the cluster is healthy fails a
	// test.
	clusterStoreTimeout = 200 * time.Millisecond

	clusterDeadline = 2 * time.Second // of each call

	// clusterLate is when a call is late: a store call may begin just
	// before the Deadline, and the machine is loaded.
	clusterLate = clusterDeadline + clusterStoreTimeout + 500*time.Millisecond

	// tenantKey is the Pacer's Key for every request of a tenant, so that
	// its store key is known before any call.
	tenantKey = "api"
)

// tenant is a service whose Budget's and Pacer's keys all live on one
// master.
type tenant struct {
	budget *BudgetStore
	pacer  *PacerStore
}

func (tn tenant) keys() []string { return []string{tn.budget.Key(), tn.pacer.Key(tenantKey)} }

// tenantOn returns a tenant on rdb whose keys hash to slots of sh, named
// after t, and deletes its keys when t ends.
func tenantOn(t *testing.T, rdb *redis.ClusterClient, sh shard) tenant {
	t.Helper()
	ctx := context.Background()
	base := uniqueName(t)
	for i := range 1000 {
		name := fmt.Sprintf("%s-%d", base, i)
		tn := tenant{budget: NewBudgetStore(rdb, name), pacer: NewPacerStore(rdb, name)}
		ok := true
		for _, key := range tn.keys() {
			slot, err := rdb.ClusterKeySlot(ctx, key).Result()
			if err != nil {
				t.Fatal(err)
			}
			ok = ok && sh.owns(slot)
		}
		if ok {
			t.Cleanup(func() {
				// Briefly: a client that still routes to a killed master
				// would try it for long.
				ctx, cancel := context.WithTimeout(ctx, time.Second)
				defer cancel()
				for _, key := range tn.keys() {
					rdb.Del(ctx, key) // one at a time: the keys are in two slots
				}
			})
			return tn
		}
	}
	t.Fatalf("no name of 1000 puts both keys on master %s", sh.master)
	return tenant{}
}

// storeLog records when each call to a tenant's stores ended, and how.
type storeLog struct {
	mu    sync.Mutex // protects calls
	calls []storeCall
}

type storeCall struct {
	store string // "budget" or "pacer"
	end   time.Time
	err   error
}

func (l *storeLog) add(store string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, storeCall{store: store, end: time.Now(), err: err})
}

// failures returns the errors of the calls that ended after from.
func (l *storeLog) failures(from time.Time) []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var errs []error
	for _, c := range l.calls {
		if c.err != nil && c.end.After(from) {
			errs = append(errs, c.err)
		}
	}
	return errs
}

// successes counts the calls to store that succeeded.
func (l *storeLog) successes(store string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.calls {
		if c.store == store && c.err == nil {
			n++
		}
	}
	return n
}

// back returns when both stores answered again after from: the later of
// the first call of each that succeeded after from and after the last
// call, of either, that failed; and when that last failure was (from, if
// none failed since). ok is false while either has not answered since.
func (l *storeLog) back(from time.Time) (back, lastFail time.Time, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lastFail = from
	for _, c := range l.calls {
		if c.err != nil && c.end.After(lastFail) {
			lastFail = c.end
		}
	}
	first := map[string]time.Time{}
	for _, c := range l.calls {
		if c.err == nil && c.end.After(lastFail) && first[c.store].IsZero() {
			first[c.store] = c.end
		}
	}
	b, p := first["budget"], first["pacer"]
	if b.IsZero() || p.IsZero() {
		return time.Time{}, lastFail, false
	}
	if p.After(b) {
		b = p
	}
	return b, lastFail, true
}

// loggedBudget and loggedPacer log the calls to a tenant's stores.
type loggedBudget struct {
	*BudgetStore
	log *storeLog
}

func (s loggedBudget) Settle(ctx context.Context, r retry.BudgetSettlement) (retry.BudgetLease, error) {
	l, err := s.BudgetStore.Settle(ctx, r)
	s.log.add("budget", err)
	return l, err
}

type loggedPacer struct {
	*PacerStore
	log *storeLog
}

func (s loggedPacer) Reserve(ctx context.Context, key string, tokens float64,
	maxWait time.Duration) (pace.Grant, error) {
	g, err := s.PacerStore.Reserve(ctx, key, tokens, maxWait)
	s.log.add("pacer", err)
	return g, err
}

func (s loggedPacer) Learn(ctx context.Context, key string, r pace.Report) error {
	err := s.PacerStore.Learn(ctx, key, r)
	s.log.add("pacer", err)
	return err
}

// tenantRun is a process's client of a tenant: a retry.Transport whose
// Budget and Pacer keep their state in the tenant's stores, every store
// call logged and every fallback counted.
type tenantRun struct {
	log          storeLog
	fallbacks    atomic.Int64
	lastFallback atomic.Int64 // Unix nanoseconds
	client       *http.Client
}

func newTenantRun(t *testing.T, tn tenant) *tenantRun {
	r := &tenantRun{}
	onFallback := func(error) {
		r.fallbacks.Add(1)
		r.lastFallback.Store(time.Now().UnixNano())
	}
	budget := &retry.Budget{Store: loggedBudget{tn.budget, &r.log}, StoreTimeout: clusterStoreTimeout,
		OnFallback: onFallback}
	pacer := &pace.Pacer{Key: func(*http.Request) string { return tenantKey },
		Store: loggedPacer{tn.pacer, &r.log}, StoreTimeout: clusterStoreTimeout, OnFallback: onFallback}
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	r.client = &http.Client{Transport: &retry.Transport{Base: base, Pacer: pacer,
		Policy: retry.Policy{Deadline: clusterDeadline, Base: 10 * time.Millisecond, Cap: 100 * time.Millisecond,
			Budget: budget}}}
	return r
}

// tenantServer answers as a rate-limited API with room to spare: OpenAI's
// headers on every response, so that the Pacer learns into its store, and
// a 503 to every tenth request, so that calls retry and spend from the
// Budget.
func tenantServer(t *testing.T) *httptest.Server {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("x-ratelimit-limit-requests", "100000")
		h.Set("x-ratelimit-remaining-requests", "99999")
		h.Set("x-ratelimit-reset-requests", "1ms")
		if n.Add(1)%10 == 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// callCount counts the calls of a run.
type callCount struct {
	mu       sync.Mutex // protects the fields below
	n, ok    int        // calls, and those answered 200
	late     int        // calls that took longer than clusterLate
	longest  time.Duration
	failures []error // calls that failed otherwise than with a *retry.Error
}

func (c *callCount) add(took time.Duration, status int, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	c.longest = max(c.longest, took)
	if took > clusterLate {
		c.late++
	}
	if status == http.StatusOK {
		c.ok++
	}
	if _, ok := errors.AsType[*retry.Error](err); err != nil && !ok {
		c.failures = append(c.failures, err)
	}
}

func (c *callCount) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprintf("%d calls, %d answered 200, the longest %v", c.n, c.ok, c.longest.Round(time.Millisecond))
}

// check fails t for calls that were late or failed as the library never
// fails, or when none succeeded.
func (c *callCount) check(t *testing.T, what string) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.late != 0 {
		t.Errorf("%s: %d of %d calls took longer than %v; the longest %v", what, c.late, c.n, clusterLate, c.longest)
	}
	if len(c.failures) != 0 {
		t.Errorf("%s: %d calls failed without a *retry.Error, the first with %v", what, len(c.failures), c.failures[0])
	}
	if c.ok == 0 {
		t.Errorf("%s: none of %d calls succeeded", what, c.n)
	}
}

// drive calls url through r's client every interval, each call in a
// goroutine of its own, until stop is called; stop waits for the calls
// under way.
func (r *tenantRun) drive(url string, every time.Duration) (c *callCount, stop func()) {
	c = &callCount{}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				wg.Go(func() { c.add(r.call(url)) })
			}
		}
	})
	return c, sync.OnceFunc(func() { close(done); wg.Wait() })
}

// call makes one call and returns how long it took and how it ended.
func (r *tenantRun) call(url string) (time.Duration, int, error) {
	began := time.Now()
	resp, err := r.client.Get(url)
	if err != nil {
		return time.Since(began), 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return time.Since(began), resp.StatusCode, nil
}
