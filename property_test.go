package retry_test

import (
	"context"
	"errors"
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

// outcome is what a call did, in a form the model predicts.
type outcome struct {
	Calls  int
	Sleeps []time.Duration
	Result string
}

// describe names err by its relation to the attempts' errors: "ok",
// "same i" (the very value attempt i+1 returned), "canceled", or
// "gave up <reason> after <n> last=i".
func describe(err error, errs []error) string {
	idx := func(e error) int {
		for i, x := range errs {
			if x != nil && x == e {
				return i
			}
		}
		return -1
	}
	var re *retry.Error
	switch {
	case err == nil:
		return "ok"
	case idx(err) >= 0 && !errors.Is(err, context.Canceled):
		return fmt.Sprintf("same %d", idx(err))
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.As(err, &re):
		return fmt.Sprintf("gave up %s after %d last=%d", re.Reason, re.Attempts, idx(re.Err))
	case strings.Contains(err.Error(), "nil response and a nil error"):
		return "nil response"
	}
	return "unexpected " + err.Error()
}

// modelDo plays steps through the loop as DESIGN.md states it.
func modelDo(c *policyCase, steps []doStep, rands []float64) outcome {
	maxAttempts, timeout, deadline, base, cap := c.resolved()
	rs := &randSeq{vals: rands}
	var o outcome
	var elapsed time.Duration
	last := -1
	for attempt := 1; ; attempt++ {
		remaining := deadline - elapsed
		if remaining <= 0 {
			o.Result = fmt.Sprintf("gave up deadline after %d last=%d", attempt-1, last)
			return o
		}
		st := steps[min(attempt-1, len(steps)-1)]
		o.Calls++
		elapsed += min(st.took, timeout, remaining)
		retryable := map[string]bool{"retryable": true, "status": statusRetryable(st.code)}[st.kind]
		switch {
		case st.kind == "ok":
			o.Result = fmt.Sprintf("ok %d", attempt-1)
			return o
		case st.kind == "cancel":
			o.Result = "canceled"
			return o
		case c.retryable != "default":
			retryable = c.retryable == "always"
		}
		if !retryable {
			o.Result = fmt.Sprintf("same %d", attempt-1)
			return o
		}
		last = attempt - 1
		hint := time.Duration(0)
		if st.kind == "status" {
			hint = st.hint
		}
		delay, stop := modelDelay(attempt, maxAttempts, base, cap, rs, c.p.RetryAfterJitter, hint, deadline-elapsed)
		if stop != "" {
			o.Result = fmt.Sprintf("gave up %s after %d last=%d", stop, attempt, last)
			return o
		}
		o.Sleeps = append(o.Sleeps, delay)
		elapsed += delay
	}
}

// randSeq hands out a Policy's Rand values in order, as the loop draws
// them.
type randSeq struct {
	vals []float64
	used int
}

func (r *randSeq) next() float64 {
	v := r.vals[r.used%len(r.vals)]
	r.used++
	return v
}

// modelDelay is steps 5 to 7 of the loop: the delay after attempt, or the
// reason to stop instead. A hint longer than the backoff sets the delay,
// plus up to jitter of itself (a second draw of Rand).
func modelDelay(attempt, maxAttempts int, base, cap time.Duration, rs *randSeq, jitter float64, hint, left time.Duration) (time.Duration, retry.Reason) {
	if attempt >= maxAttempts {
		return 0, retry.ReasonMaxAttempts
	}
	delay := retry.Backoff(attempt, base, cap, rs.next)
	if hint > delay {
		delay = hint
		if jitter > 0 {
			f := min(max(rs.next(), 0), 1)
			if math.IsNaN(f) {
				f = 1
			}
			extra := float64(hint) * jitter * f
			if extra >= float64(math.MaxInt64-hint) {
				delay = math.MaxInt64
			} else {
				delay = hint + time.Duration(extra)
			}
		}
	}
	if delay >= left {
		return 0, retry.ReasonDeadline
	}
	return delay, ""
}

func statusRetryable(code int) bool {
	return code == 408 || code == 429 || code >= 500 && code <= 599 && code != 501 && code != 505
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

// modelTransport plays c through the loop and the Transport's rules as
// DESIGN.md states them. It returns the shortest timeout of a failed
// attempt too: below a few hundred milliseconds of real time the attempt's
// own timer may decide the outcome.
func modelTransport(c *tCase, start time.Time, rands []float64) (outcome, time.Duration) {
	maxAttempts, timeout, deadline, base, cap := c.pc.resolved()
	rs := &randSeq{vals: rands}
	rewind, replay := c.body != "once", replayable(c)
	var o outcome
	var elapsed time.Duration
	minTimeout := time.Duration(1<<63 - 1)
	last := -1
	for attempt := 1; ; attempt++ {
		n, remaining := attempt-1, deadline-elapsed
		if remaining <= 0 {
			o.Result = fmt.Sprintf("gave up deadline after %d last=%d", n, last)
			return o, minTimeout
		}
		st := c.steps[min(n, len(c.steps)-1)]
		o.Calls++
		elapsed += min(st.took, timeout, remaining)
		var retryable, eligible bool
		var hint time.Duration
		switch st.kind {
		case "respond":
			if st.status < 400 {
				o.Result = fmt.Sprintf("response %d %d", n, st.status)
				return o, minTimeout
			}
			_, hint = hintHeader(st.hint, start.Add(elapsed))
			retryable = st.should == "true" || st.should != "false" && statusRetryable(st.status)
			eligible = rewind && (replay || st.status == 429 || st.should == "true")
		case "cancel":
			o.Result = "canceled"
			return o, minTimeout
		case "dial":
			retryable, eligible = true, rewind
		case "reset", "timeout":
			retryable, eligible = true, replay
		default:
			eligible = replay
		}
		if st.kind != "respond" {
			minTimeout = min(minTimeout, timeout, remaining)
		}
		if c.pc.retryable != "default" {
			retryable = c.pc.retryable == "always"
		}
		fail := fmt.Sprintf("same %d", n)
		switch st.kind {
		case "respond":
			fail, last = fmt.Sprintf("response %d %d", n, st.status), -1
		case "nilnil":
			fail, last = "nil response", -1
		default:
			last = n
		}
		if !eligible || !retryable {
			o.Result = fail
			return o, minTimeout
		}
		delay, stop := modelDelay(attempt, maxAttempts, base, cap, rs, c.pc.p.RetryAfterJitter, hint, deadline-elapsed)
		if stop != "" && st.kind == "respond" {
			o.Result = fail
			return o, minTimeout
		}
		if stop != "" {
			o.Result = fmt.Sprintf("gave up %s after %d last=%d", stop, attempt, last)
			return o, minTimeout
		}
		o.Sleeps = append(o.Sleeps, delay)
		elapsed += delay
	}
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
