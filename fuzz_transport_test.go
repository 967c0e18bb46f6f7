package retry_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/retrykit/retry"
)

// FuzzTransport turns its input into a request, a Policy and a script for
// the base RoundTripper (each byte one choice; see genTCase) and checks
// every invariant of runTransportCase: attempts, sleeps and Deadline,
// replays, bodies drained and closed, the caller's request untouched, the
// returned response the last one and unread, and the model's outcome.
func FuzzTransport(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("POST with a key, three 503s then 200"))
	f.Add([]byte{3, 0, 5, 1, 1, 1, 1, 4, 0, 0, 0, 4, 0, 11, 0, 0, 3, 0, 0, 2, 0})
	f.Add([]byte{7, 1, 1, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 3, 6, 6, 0, 3, 1, 0, 5, 4, 2})
	f.Add([]byte{0xff, 0xfe, 0xfd, 0xfc, 0xfb, 0xfa, 0xf9, 0xf8, 0xf7, 0xf6, 0xf5, 0xf4, 0xf3, 0xf2})
	f.Fuzz(func(t *testing.T, data []byte) {
		c := genTCase(&byteSrc{data})
		runTransportCase(t, &c)
	})
}

// tStep is what the scripted base RoundTripper does for one call.
type tStep struct {
	kind   string // "respond", "dial", "reset", "timeout", "fatal", "cancel", "nilnil" or "both"
	status int    // for "respond"
	hint   int    // index into hintValues
	should string // the x-should-retry header; "" for none
	size   int64  // the response body's length
	took   time.Duration
}

// tCase is one request through a Transport over a scripted base.
type tCase struct {
	pc     policyCase
	method string
	key    string // the idempotency key header, "" for none
	body   string // "none", "rewind" (with GetBody) or "once" (without)
	steps  []tStep

	autoKey    string // Transport.IdempotencyKey: "" none, "auto" a key, "empty" an empty one
	replayable string // Transport.Replayable: "" none, "yes" or "no" for every request
}

func genTCase(s src) tCase {
	c := tCase{
		pc: genPolicy(s, []time.Duration{0, time.Second, 10 * time.Second},
			[]time.Duration{0, time.Second, 3 * time.Second, 10 * time.Second, time.Minute, time.Hour}),
		method: pick(s, "GET", "POST", "POST", "PATCH", "PUT", "DELETE"),
		key:    pick(s, "", "", "Idempotency-Key", "X-Idempotency-Key", "nil"),
		body:   pick(s, "none", "rewind", "rewind", "once"),
	}
	c.autoKey = pick(s, "", "", "", "auto", "empty")
	c.replayable = pick(s, "", "", "", "yes", "no")
	c.steps = make([]tStep, 1+s.intn(7))
	for i := range c.steps {
		c.steps[i] = tStep{
			kind:   pick(s, "respond", "respond", "respond", "dial", "reset", "timeout", "fatal", "cancel", "nilnil", "both"),
			status: pick(s, 200, 204, 307, 400, 404, 408, 429, 429, 500, 501, 502, 503, 503, 505),
			hint:   s.intn(len(hintValues)),
			should: pick(s, "", "", "", "true", "false"),
			size:   pick[int64](s, 0, 10, 100<<10, 1<<20),
			took:   pick(s, 0, 0, time.Millisecond, 50*time.Millisecond, time.Second, time.Minute),
		}
	}
	return c
}

// hintValues are the Retry-After headers a scripted response carries, with
// the hint they mean; "date+5" and "date-60" are HTTP-dates that many
// seconds from the response.
var hintValues = []struct {
	key, val string
	want     time.Duration
}{
	{"", "", 0}, {"Retry-After", "0", 0}, {"Retry-After", "2", 2 * time.Second},
	{"Retry-After", "120", 2 * time.Minute}, {"Retry-After", "-1", 0}, {"Retry-After", "soon", 0},
	{"Retry-After", "123456789012345678901234567890", 1<<63 - 1},
	{"Retry-After", "1700000000", 1_700_000_000 * time.Second}, {"Retry-After", "+5", 0},
	{"Retry-After-Ms", "1500", 1500 * time.Millisecond}, {"Retry-After-Ms", "0.5", 500 * time.Microsecond},
	{"Retry-After-Ms", "junk", 0}, {"Retry-After", "date+5", 0}, {"Retry-After", "date-60", 0},
}

// hintHeader returns the header of hintValues[i] sent at now, and the hint
// it means.
func hintHeader(i int, now time.Time) (http.Header, time.Duration) {
	h := make(http.Header)
	v := hintValues[i]
	if v.key == "" {
		return h, 0
	}
	if d, ok := strings.CutPrefix(v.val, "date"); ok {
		secs := map[string]time.Duration{"+5": 5 * time.Second, "-60": -time.Minute}[d]
		date := now.Add(secs).UTC().Format(http.TimeFormat)
		h.Set(v.key, date)
		at, _ := http.ParseTime(date)
		return h, max(at.Sub(now), 0)
	}
	h.Set(v.key, v.val)
	return h, v.want
}

// tracked is a generated response body that counts what was read and
// whether it was closed.
type tracked struct {
	call   int // the call, counting from 0, that returned it
	prefix string
	size   int64
	read   int64
	closed bool
}

func (b *tracked) Read(p []byte) (int, error) {
	if b.closed {
		return 0, errors.New("read after close")
	}
	if b.read >= b.size {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), b.size-b.read)]
	n := 0
	if b.read < int64(len(b.prefix)) {
		n = copy(p, b.prefix[b.read:])
	}
	for n < len(p) {
		n += copy(p[n:], dots)
	}
	b.read += int64(n)
	return n, nil
}

var dots = bytes.Repeat([]byte("."), 4096)

func (b *tracked) Close() error { b.closed = true; return nil }

// scriptTimeoutError is a net.Error that timed out.
type scriptTimeoutError struct{ n int }

func (e *scriptTimeoutError) Error() string   { return fmt.Sprintf("call %d: i/o timeout", e.n) }
func (e *scriptTimeoutError) Timeout() bool   { return true }
func (e *scriptTimeoutError) Temporary() bool { return true }

// scriptBase is a base RoundTripper that plays a tCase's steps in memory.
type scriptBase struct {
	t        *testing.T
	c        *tCase
	r        *recorder
	cancel   context.CancelFunc
	caller   *http.Request
	body     []byte // what every attempt must send
	errs     []error
	hints    []time.Duration
	bodies   []*tracked
	timeouts []time.Duration // each attempt's timeout as the model expects it
}

func (b *scriptBase) RoundTrip(req *http.Request) (*http.Response, error) {
	n := len(b.errs)
	st := b.c.steps[min(n, len(b.c.steps)-1)]
	if req == b.caller {
		b.t.Errorf("call %d: the caller's own *http.Request was sent", n+1)
	}
	b.checkBody(n, req)
	if autoKeyed(b.c) && req.Header.Get("Idempotency-Key") != "auto-1" {
		b.t.Errorf("call %d: Idempotency-Key %q, want the Transport's auto-1", n+1, req.Header.Get("Idempotency-Key"))
	}
	_, timeout, deadline, _, _ := b.c.pc.resolved()
	remaining := deadline - b.r.ft.Clock.Since(b.r.start)
	b.timeouts = append(b.timeouts, min(timeout, remaining))
	b.r.ft.Clock.Advance(min(st.took, timeout, remaining))
	var err error
	var hint time.Duration
	switch st.kind {
	case "dial":
		err = &net.OpError{Op: "dial", Net: "tcp", Err: fmt.Errorf("call %d: %w", n, syscall.ECONNREFUSED)}
	case "reset":
		err = &net.OpError{Op: "read", Net: "tcp", Err: fmt.Errorf("call %d: %w", n, syscall.ECONNRESET)}
	case "timeout":
		err = &scriptTimeoutError{n}
	case "fatal", "both":
		err = fmt.Errorf("call %d: fatal", n)
	case "cancel":
		b.cancel()
		err = fmt.Errorf("call %d: %w", n, context.Canceled)
	}
	var resp *http.Response
	if st.kind == "respond" || st.kind == "both" {
		var h http.Header
		h, hint = hintHeader(st.hint, b.r.ft.Clock.Now())
		if st.should != "" {
			h.Set("X-Should-Retry", st.should)
		}
		body := &tracked{call: n, prefix: fmt.Sprintf("response %d;", n), size: st.size}
		b.bodies = append(b.bodies, body)
		resp = &http.Response{StatusCode: st.status, Status: fmt.Sprint(st.status), Header: h,
			Body: body, ContentLength: st.size, Request: req}
	}
	if st.kind == "respond" && st.status < 400 || err != nil {
		hint = 0
	}
	b.errs, b.hints = append(b.errs, err), append(b.hints, hint)
	return resp, err
}

// checkBody reads and closes the attempt's request body, which must equal
// the caller's.
func (b *scriptBase) checkBody(n int, req *http.Request) {
	if req.Body == nil || req.Body == http.NoBody {
		if b.c.body != "none" {
			b.t.Errorf("call %d: no request body, want %q", n+1, b.body)
		}
		return
	}
	got, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	if err != nil || !bytes.Equal(got, b.body) {
		b.t.Errorf("call %d: request body %q, %v; want %q", n+1, got, err, b.body)
	}
}

// newCallerRequest builds the caller's request of c.
func newCallerRequest(ctx context.Context, c *tCase, body []byte) *http.Request {
	var rd io.Reader
	if c.body != "none" {
		rd = bytes.NewReader(body)
	}
	req, _ := http.NewRequestWithContext(ctx, c.method, "http://api.test/v1?q=1", rd)
	if c.body == "once" {
		req.Body, req.GetBody = io.NopCloser(bytes.NewReader(body)), nil
	}
	req.Header.Set("Authorization", "Bearer secret-token")
	switch c.key {
	case "nil":
		req.Header["Idempotency-Key"] = nil
	case "":
	default:
		req.Header.Set(c.key, "key-1")
	}
	return req
}

// snapshot is what the caller can see of its request.
type snapshot struct {
	Method, URL, Host string
	Header            http.Header
	Body              io.ReadCloser
	HasGetBody        bool
	ContentLength     int64
	Ctx               context.Context
}

func snap(r *http.Request) snapshot {
	return snapshot{r.Method, r.URL.String(), r.Host, r.Header.Clone(), r.Body, r.GetBody != nil, r.ContentLength, r.Context()}
}

// runTransportCase sends c's request through a Transport over a scripted
// base and checks the invariants and the model. It reports whether some
// failed attempt ran under a timeout too short for its exact outcome to be
// certain (its real timer may fire first); then only the invariants hold.
func runTransportCase(t *testing.T, c *tCase) (uncertain bool) {
	r, p := newRecorder(&c.pc)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	body := []byte("secret-body " + strings.Repeat("b", len(c.steps)))
	req := newCallerRequest(ctx, c, body)
	before := snap(req)
	b := &scriptBase{t: t, c: c, r: r, cancel: cancel, caller: req, body: body}
	rt := retry.NewTransport(b, p)
	switch c.autoKey {
	case "auto":
		rt.IdempotencyKey = func() string { return "auto-1" }
	case "empty":
		rt.IdempotencyKey = func() string { return "" }
	}
	if c.replayable != "" {
		yes := c.replayable == "yes"
		rt.Replayable = func(*http.Request) bool { return yes }
	}
	resp, err := rt.RoundTrip(req)
	checkLoop(t, &c.pc, r, len(b.errs), b.hints, b.errs)
	if diff := cmp.Diff(before, snap(req), cmp.Comparer(func(a, b context.Context) bool { return a == b }),
		cmp.Comparer(func(a, b io.ReadCloser) bool { return a == b })); diff != "" {
		t.Errorf("caller's request changed (-before +after):\n%s", diff)
	}
	if resp != nil && err != nil {
		t.Errorf("RoundTrip returned a response and an error: %v", err)
	}
	checkReplays(t, c, len(b.errs))
	got := outcome{Calls: len(b.errs), Sleeps: r.ft.Sleeps(), Result: describe(err, b.errs)}
	if resp != nil {
		// A custom Retryable may peek at an error body; the caller must
		// still read it whole.
		peeked := map[bool]int64{true: 4 << 10}[c.pc.p.Retryable != nil]
		got.Result = checkResponse(t, resp, b.bodies, peeked)
	}
	checkBodiesClosed(t, b.bodies, resp == nil)
	checkSecrets(t, err, r.events)
	checkStatusEvents(t, c, b, r.events)
	want, minTimeout := modelTransport(c, r.start, r.rands)
	if minTimeout < 200*time.Millisecond {
		return true
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("RoundTrip (-want +got):\n%s", diff)
	}
	return false
}

// checkReplays: a request that may not be replayed is sent again only
// after a failure that proves the server did not process it.
func checkReplays(t *testing.T, c *tCase, calls int) {
	t.Helper()
	if replayable(c) {
		return
	}
	for i := range calls - 1 {
		st := c.steps[min(i, len(c.steps)-1)]
		safe := st.kind == "dial" || st.kind == "respond" && (st.status == 429 || st.should == "true")
		if !safe {
			t.Errorf("%s without a key sent again after call %d: %+v", c.method, i+1, st)
		}
	}
}

func replayable(c *tCase) bool {
	if c.body == "once" {
		return false
	}
	if autoKeyed(c) || c.replayable == "yes" {
		return true
	}
	if c.replayable == "no" {
		return false
	}
	switch c.method {
	case "GET", "PUT", "DELETE":
		return true
	}
	return c.key != ""
}

// autoKeyed reports whether the Transport gives c's request a key.
func autoKeyed(c *tCase) bool {
	return c.autoKey == "auto" && c.key == "" && (c.method == "POST" || c.method == "PATCH")
}

// checkResponse reads the returned response, which must be the last
// attempt's, unread (but for up to peeked bytes put back in front), and
// closes it.
func checkResponse(t *testing.T, resp *http.Response, bodies []*tracked, peeked int64) string {
	t.Helper()
	last := bodies[len(bodies)-1]
	if last.read > peeked || last.closed {
		t.Errorf("returned body already read %d bytes, closed %v", last.read, last.closed)
	}
	data, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil || int64(len(data)) != last.size || !strings.HasPrefix(last.prefix, string(data[:min(len(data), len(last.prefix))])) {
		t.Errorf("returned body: %d bytes starting %.20q, %v; want %d bytes of %q", len(data), data, err, last.size, last.prefix)
	}
	if !last.closed || last.read != last.size {
		t.Errorf("the base's body: closed %v, %d of %d bytes read; want the caller's reads and Close to reach it",
			last.closed, last.read, last.size)
	}
	return fmt.Sprintf("response %d %d", last.call, resp.StatusCode)
}

// checkBodiesClosed: every discarded body was closed after at most 64 KiB
// was read from it.
func checkBodiesClosed(t *testing.T, bodies []*tracked, all bool) {
	t.Helper()
	for i, b := range bodies {
		if i == len(bodies)-1 && !all {
			continue
		}
		if !b.closed || b.read > 64<<10 {
			t.Errorf("discarded body %d: closed %v after reading %d bytes; want closed after at most 64 KiB", i, b.closed, b.read)
		}
	}
}

// checkStatusEvents: the Event of a retried status carries a *StatusError
// with the status and the Retry-After hint of its response.
func checkStatusEvents(t *testing.T, c *tCase, b *scriptBase, events []retry.Event) {
	t.Helper()
	for i, e := range events {
		st := c.steps[min(i, len(c.steps)-1)]
		if st.kind != "respond" {
			continue
		}
		se, ok := e.Err.(*retry.StatusError)
		if !ok || se.StatusCode != st.status || se.RetryAfter != b.hints[i] || se.Response == nil {
			t.Errorf("event %d: Err %#v, want a *StatusError %d with RetryAfter %v and its Response", i, e.Err, st.status, b.hints[i])
		}
	}
}
