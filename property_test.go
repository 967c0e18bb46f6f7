package retry_test

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrytest"
)

// doCases is how many random scripts TestDoProperties plays; with the
// Transport's cases it makes the "cases run" figure of the README.
const doCases = 12000

// src feeds the case generators: a seeded random source in the property
// tests, the fuzzer's bytes in FuzzTransport.
type src interface{ intn(n int) int }

type randSrc struct{ r *rand.Rand }

func (s randSrc) intn(n int) int { return s.r.IntN(n) }

func newRandSrc(seed uint64) randSrc { return randSrc{rand.New(rand.NewPCG(seed, 0x5eed))} }

// byteSrc reads choices from fuzz input; once it is used up every choice
// is 0.
type byteSrc struct{ b []byte }

func (s *byteSrc) intn(n int) int {
	if n <= 1 || len(s.b) == 0 {
		return 0
	}
	v := int(s.b[0])
	s.b = s.b[1:]
	return v % n
}

func pick[T any](s src, vs ...T) T { return vs[s.intn(len(vs))] }

// policyCase is a random Policy with the parts the harness fills in left
// out, and the values its Rand will return, in order.
type policyCase struct {
	p         retry.Policy
	retryable string // "default", "always" or "never"
	rands     []float64
}

// genPolicy draws a Policy: its AttemptTimeout from timeouts and its
// Deadline from deadlines.
func genPolicy(s src, timeouts, deadlines []time.Duration) policyCase {
	durs := []time.Duration{0, time.Millisecond, 10 * time.Millisecond, 100 * time.Millisecond,
		500 * time.Millisecond, time.Second, 3 * time.Second, 10 * time.Second, time.Minute, time.Hour}
	if deadlines == nil {
		deadlines = durs
	}
	c := policyCase{p: retry.Policy{
		MaxAttempts:      s.intn(8),
		AttemptTimeout:   pick(s, timeouts...),
		Deadline:         pick(s, deadlines...),
		Base:             pick(s, durs...),
		Cap:              pick(s, durs...),
		RetryAfterJitter: pick(s, 0, 0, 0, 0.1, 1),
	}, retryable: pick(s, "default", "default", "default", "always", "never")}
	switch c.retryable {
	case "always":
		c.p.Retryable = func(error) bool { return true }
	case "never":
		c.p.Retryable = func(error) bool { return false }
	}
	for range 12 {
		c.rands = append(c.rands, pick(s, 0, 0.25, 0.5, 0.999, 1, -1, 2, math.NaN(), float64(s.intn(1000))/1000))
	}
	return c
}

// resolved returns the Policy's effective settings.
func (c policyCase) resolved() (maxAttempts int, timeout, deadline, base, cap time.Duration) {
	or := func(v, d time.Duration) time.Duration {
		if v == 0 {
			return d
		}
		return v
	}
	maxAttempts = c.p.MaxAttempts
	if maxAttempts == 0 {
		maxAttempts = retry.DefaultMaxAttempts
	}
	return maxAttempts, or(c.p.AttemptTimeout, retry.DefaultAttemptTimeout),
		or(c.p.Deadline, retry.DefaultDeadline), or(c.p.Base, retry.DefaultBase), or(c.p.Cap, retry.DefaultCap)
}

// bound is min(cap, base*2^(attempt-1)), computed without shifts.
func bound(attempt int, base, cap time.Duration) time.Duration {
	b := base
	for i := 1; i < attempt && b < cap; i++ {
		b *= 2
	}
	return min(b, cap)
}

// recorder plugs fake time, a scripted Rand and an event log into a Policy.
type recorder struct {
	ft     *retrytest.FakeTime
	start  time.Time
	rands  []float64
	used   int // rand values handed out
	events []retry.Event
}

func newRecorder(c *policyCase) (*recorder, retry.Policy) {
	r := &recorder{ft: retrytest.NewFakeTime(), rands: c.rands}
	r.start = r.ft.Clock.Now()
	p := c.p
	p.Clock, p.Sleep = r.ft.Clock, r.ft.Sleep
	p.Rand = func() float64 {
		v := r.rands[r.used%len(r.rands)]
		r.used++
		return v
	}
	p.OnRetry = func(e retry.Event) { r.events = append(r.events, e) }
	return r, p
}

// checkLoop asserts the loop's invariants on what r recorded, whatever the
// script: calls within MaxAttempts, no sleep after the final attempt nor
// past the Deadline, every delay within its backoff bound or equal to the
// server's larger hint, one Event per sleep. hints[i] is attempt i+1's
// Retry-After hint; errs[i] its error.
func checkLoop(t *testing.T, c *policyCase, r *recorder, calls int, hints []time.Duration, errs []error) {
	t.Helper()
	maxAttempts, _, deadline, base, cap := c.resolved()
	if calls > maxAttempts {
		t.Errorf("%d calls, MaxAttempts %d", calls, maxAttempts)
	}
	sleeps := r.ft.Sleeps()
	if calls > 0 && len(sleeps) != calls-1 {
		t.Errorf("%d sleeps for %d calls, want one between each two calls: %v", len(sleeps), calls, sleeps)
	}
	if el := r.ft.Clock.Since(r.start); el > deadline {
		t.Errorf("elapsed %v past the Deadline %v", el, deadline)
	}
	for i, d := range sleeps {
		hint := hints[i]
		b, top := bound(i+1, base, cap), jittered(hint, c.p.RetryAfterJitter)
		if d < 0 || d < hint || d > max(b, top) {
			t.Errorf("sleep %d = %v, want in [%v, %v] (bound %v, hint %v)", i+1, d, hint, max(b, top), b, hint)
		}
	}
	if len(r.events) != len(sleeps) {
		t.Fatalf("%d events for %d sleeps", len(r.events), len(sleeps))
	}
	for i, e := range r.events {
		if e.Attempt != i+1 || e.Delay != sleeps[i] || e.Err == nil || errs[i] != nil && e.Err != errs[i] {
			t.Errorf("event %d = {%d %v %v}, want {%d %v %v}", i, e.Attempt, e.Delay, e.Err, i+1, sleeps[i], errs[i])
		}
		hint := hints[i]
		if hint > bound(i+1, base, cap) && !e.FromRetryAfter ||
			e.FromRetryAfter && (e.Delay < hint || e.Delay > jittered(hint, c.p.RetryAfterJitter)) {
			t.Errorf("event %d: FromRetryAfter %v for delay %v, hint %v", i, e.FromRetryAfter, e.Delay, hint)
		}
	}
}

// jittered is the most a hint may become with RetryAfterJitter j.
func jittered(hint time.Duration, j float64) time.Duration {
	if x := float64(hint) * (1 + j); x < math.MaxInt64 {
		return time.Duration(x)
	}
	return math.MaxInt64
}

// doStep is one scripted call of fn.
type doStep struct {
	kind string // "ok", "retryable", "fatal", "status" or "cancel"
	code int    // for "status"
	hint time.Duration
	took time.Duration // fake time the call takes, cut to its timeout
}

func genDoSteps(s src) []doStep {
	steps := make([]doStep, 1+s.intn(9))
	for i := range steps {
		steps[i] = doStep{
			kind: pick(s, "retryable", "retryable", "status", "status", "ok", "fatal", "cancel"),
			code: pick(s, 400, 404, 408, 429, 500, 501, 502, 503, 505, 599),
			hint: pick(s, 0, 0, time.Millisecond, time.Second, 5*time.Second, time.Hour, time.Duration(math.MaxInt64)),
			took: pick(s, 0, 0, time.Millisecond, 50*time.Millisecond, time.Second, time.Minute),
		}
	}
	return steps
}

func TestDoProperties(t *testing.T) {
	for i := range doCases {
		s := newRandSrc(uint64(i))
		c := genPolicy(s, []time.Duration{0, time.Millisecond, time.Second, 10 * time.Second}, nil)
		steps := genDoSteps(s)
		runDoCase(t, &c, steps)
		if t.Failed() {
			t.Fatalf("case %d failed: policy %+v (Retryable %s), steps %+v", i, c.p, c.retryable, steps)
		}
	}
	t.Logf("%d Do cases", doCases)
}

func runDoCase(t *testing.T, c *policyCase, steps []doStep) {
	r, p := newRecorder(c)
	maxAttempts, timeout, deadline, _, _ := c.resolved()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errs := make([]error, 0, maxAttempts)
	hints := make([]time.Duration, 0, maxAttempts)
	fn := func(actx context.Context) (int, error) {
		n := len(errs)
		st := steps[min(n, len(steps)-1)]
		remaining := deadline - r.ft.Clock.Since(r.start)
		if dl, ok := actx.Deadline(); !ok || time.Until(dl) > min(timeout, remaining) {
			t.Errorf("attempt %d: deadline in %v, want within min(%v, %v)", n+1, time.Until(dl), timeout, remaining)
		}
		r.ft.Clock.Advance(min(st.took, timeout, remaining))
		hint, err := doErr(n, st)
		errs, hints = append(errs, err), append(hints, hint)
		if st.kind == "cancel" {
			cancel()
		}
		return n, err
	}
	v, err := retry.Do(ctx, p, fn)
	checkLoop(t, c, r, len(errs), hints, errs)
	want := modelDo(c, steps, r.rands)
	got := outcome{Calls: len(errs), Sleeps: r.ft.Sleeps(), Result: describe(err, errs)}
	if err == nil {
		got.Result = fmt.Sprintf("ok %d", v)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Do (-want +got):\n%s", diff)
	}
}

// doErr returns the Retry-After hint of call n (counting from 0) playing
// st, and its error, each a distinct value.
func doErr(n int, st doStep) (time.Duration, error) {
	switch st.kind {
	case "ok":
		return 0, nil
	case "fatal":
		return 0, fmt.Errorf("call %d: fatal", n)
	case "status":
		return st.hint, &retry.StatusError{StatusCode: st.code, RetryAfter: st.hint}
	}
	return 0, fmt.Errorf("call %d: %w", n, io.ErrUnexpectedEOF)
}

// transportCases is how many random requests TestTransportProperties
// sends through a Transport over the scripted base.
const transportCases = 600

func TestTransportProperties(t *testing.T) {
	uncertain := 0
	for i := range transportCases {
		c := genTCase(newRandSrc(1<<32 + uint64(i)))
		if runTransportCase(t, &c) {
			uncertain++
		}
		if t.Failed() {
			t.Fatalf("case %d failed: %s, key %q, body %s, auto key %q, replayable %q; policy %+v (Retryable %s); steps %+v",
				i, c.method, c.key, c.body, c.autoKey, c.replayable, c.pc.p, c.pc.retryable, c.steps)
		}
	}
	t.Logf("%d Transport cases, %d checked by invariants only", transportCases, uncertain)
}

// checkSecrets: no error and no Event carries the request's credentials or
// body.
func checkSecrets(t *testing.T, err error, events []retry.Event) {
	t.Helper()
	var texts []string
	if err != nil {
		texts = append(texts, err.Error())
	}
	for _, e := range events {
		if e.Err != nil {
			texts = append(texts, e.Err.Error())
		}
	}
	for _, s := range texts {
		if strings.Contains(s, "secret-token") || strings.Contains(s, "secret-body") {
			t.Errorf("a secret reached an error: %q", s)
		}
	}
}
