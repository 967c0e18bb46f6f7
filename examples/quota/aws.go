package main

import (
	"math"
	"net/http"
	"sync"
	"time"
)

// Adaptive is a model of the AWS SDKs' "adaptive" retry mode: a client-side
// rate limiter that starts disabled, switches on at the first throttle, and
// then sets its rate by CUBIC (the TCP congestion control of RFC 8312): cut
// to beta times the measured sending rate at each throttle, then grown along
// a cubic curve back to, and past, the rate at which the last throttle came.
// It never reads the server's rate-limit headers. The constants are the
// SDKs' published ones: beta 0.7, scale constant 0.4, smoothing 0.8 of the
// sending rate measured over half-second buckets, a floor of 0.5 requests
// per second, and a new rate never above twice the measured one.
//
// This is written from that description for the comparison only; the
// library has no such limiter.
type Adaptive struct {
	mu sync.Mutex // protects the fields below

	enabled      bool
	fillRate     float64 // tokens (requests) per second
	capacity     float64
	tokens       float64
	lastRefill   time.Time
	measuredRate float64
	rateBucket   float64 // the current half-second bucket, in seconds
	count        float64 // requests in it
	lastMaxRate  float64
	lastThrottle time.Time
	window       float64 // CUBIC's K: seconds from a throttle back to lastMaxRate
}

// The published constants of the adaptive mode.
const (
	awsBeta        = 0.7
	awsScale       = 0.4
	awsSmooth      = 0.8
	awsMinFillRate = 0.5
)

// NewAdaptive returns a limiter, disabled until its first throttle.
func NewAdaptive(now time.Time) *Adaptive {
	return &Adaptive{capacity: 1, rateBucket: math.Floor(seconds(now)*2) / 2, lastThrottle: now}
}

func seconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// acquire takes a token for one attempt, or says how long to wait first.
func (a *Adaptive) acquire(now time.Time) (bool, time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.enabled {
		return true, 0
	}
	a.refill(now)
	if a.tokens < 1 {
		// At least a microsecond: a wait rounded to nothing would spin.
		return false, max(time.Duration((1-a.tokens)/a.fillRate*float64(time.Second)), time.Microsecond)
	}
	a.tokens--
	return true, 0
}

func (a *Adaptive) refill(now time.Time) {
	if !a.lastRefill.IsZero() {
		a.tokens = min(a.capacity, a.tokens+now.Sub(a.lastRefill).Seconds()*a.fillRate)
	}
	a.lastRefill = now
}

// update learns from one attempt's outcome.
func (a *Adaptive) update(now time.Time, throttled bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	// The sending rate, measured over half-second buckets and smoothed.
	bucket := math.Floor(seconds(now)*2) / 2
	a.count++
	if bucket > a.rateBucket {
		current := a.count / (bucket - a.rateBucket)
		a.measuredRate = current*awsSmooth + a.measuredRate*(1-awsSmooth)
		a.count, a.rateBucket = 0, bucket
	}
	var rate float64
	if throttled {
		use := a.measuredRate
		if a.enabled {
			use = min(use, a.fillRate)
		}
		a.lastMaxRate = use
		a.window = math.Cbrt(a.lastMaxRate * (1 - awsBeta) / awsScale)
		a.lastThrottle = now
		rate = use * awsBeta
		a.enabled = true
	} else {
		a.window = math.Cbrt(a.lastMaxRate * (1 - awsBeta) / awsScale)
		dt := now.Sub(a.lastThrottle).Seconds()
		rate = awsScale*math.Pow(dt-a.window, 3) + a.lastMaxRate
	}
	rate = min(rate, 2*a.measuredRate)
	a.refill(now)
	a.fillRate = max(rate, awsMinFillRate)
	a.capacity = max(rate, 1)
	a.tokens = min(a.tokens, a.capacity)
}

// adaptiveRT sends each attempt through the limiter: it waits for a token,
// then tells the limiter whether the server throttled the attempt.
type adaptiveRT struct {
	lim  *Adaptive
	next http.RoundTripper
}

func (t adaptiveRT) RoundTrip(req *http.Request) (*http.Response, error) {
	for {
		ok, wait := t.lim.acquire(time.Now())
		if ok {
			break
		}
		if err := sleep(req.Context(), wait); err != nil {
			return nil, err
		}
	}
	resp, err := t.next.RoundTrip(req)
	if err == nil {
		t.lim.update(time.Now(), resp.StatusCode == http.StatusTooManyRequests)
	}
	return resp, err
}
