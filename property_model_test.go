package retry_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/retrykit/retry"
)

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
