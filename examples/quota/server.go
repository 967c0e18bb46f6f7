package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Formats are the header formats the server can answer in.
var Formats = []string{"openai", "anthropic", "github", "ietf"}

// windowed reports a format whose server keeps fixed windows of requests.
func windowed(format string) bool { return format == "github" || format == "ietf" }

// Server is an in-memory API that enforces a requests-per-minute and a
// tokens-per-minute limit, as token buckets that refill continuously (or,
// for the github and ietf formats, a fixed window of requests of a minute:
// GitHub counts no tokens, and the IETF fields describe quotas that return
// whole at the end of a window), and reports them in one header format. It is an
// http.RoundTripper, so a client sends to it without a network; its
// service times run on the time package, so under testing/synctest they
// take no real time.
//
// A request says what it costs in its X-Cost header. One the limits cannot
// admit gets a 429 with a Retry-After; an admitted one is served after a
// service time drawn between ServiceMin and ServiceMax. The headers report
// the buckets as they were when the request was admitted, as real APIs do.
type Server struct {
	Format     string
	RPM, TPM   float64
	ServiceMin time.Duration
	ServiceMax time.Duration
	// Queue, when set, makes the server hold a request until the limits
	// admit it, first come first served, instead of refusing it: the ideal
	// schedule the strategies are measured against.
	Queue bool

	mu       sync.Mutex // protects the fields below
	rng      *rand.Rand
	started  bool
	req, tok serverBucket
	window   time.Time // github, ietf: when the current window began
	used     int       // github, ietf: requests admitted in it
	attempts int
	refused  int
}

type serverBucket struct {
	limit, level, rate float64 // rate per second
	at                 time.Time
}

func (b *serverBucket) refill(now time.Time) {
	b.level = min(b.limit, b.level+b.rate*now.Sub(b.at).Seconds())
	b.at = now
}

// toFull is the time until the bucket is full again.
func (b *serverBucket) toFull() time.Duration {
	return time.Duration((b.limit - b.level) / b.rate * float64(time.Second))
}

// NewServer returns a server with full buckets from its first request on.
func NewServer(format string, rpm, tpm float64, seed uint64) *Server {
	return &Server{Format: format, RPM: rpm, TPM: tpm, ServiceMin: time.Second, ServiceMax: 3 * time.Second,
		rng: rand.New(rand.NewPCG(seed, seed^0x5eed))}
}

// Counts returns the attempts the server saw and those it refused.
func (s *Server) Counts() (attempts, refused int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attempts, s.refused
}

// RoundTrip admits or refuses req, then serves it.
func (s *Server) RoundTrip(req *http.Request) (*http.Response, error) {
	cost, _ := strconv.ParseFloat(req.Header.Get("X-Cost"), 64)
	h := http.Header{}
	wait, ok, service := s.admit(time.Now(), cost, h)
	if !ok {
		return respond(req, http.StatusTooManyRequests, h), nil
	}
	if err := sleep(req.Context(), wait+service); err != nil {
		return nil, err
	}
	if _, ok := h["Date"]; ok {
		// The counts are the admission's; the Date is the response's, as
		// a real server writes it with the headers.
		h.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	}
	return respond(req, http.StatusOK, h), nil
}

func respond(req *http.Request, code int, h http.Header) *http.Response {
	return &http.Response{StatusCode: code, Status: http.StatusText(code), Header: h, Body: http.NoBody,
		Request: req, ProtoMajor: 1, ProtoMinor: 1}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// admit takes a request of cost tokens at now: it reports whether it is
// admitted, after how long a queue (Queue only) and for how long a service,
// and writes the rate-limit headers into h.
func (s *Server) admit(now time.Time, cost float64, h http.Header) (wait time.Duration, ok bool, service time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		s.started = true
		s.req = serverBucket{limit: s.RPM, level: s.RPM, rate: s.RPM / 60, at: now}
		s.tok = serverBucket{limit: s.TPM, level: s.TPM, rate: s.TPM / 60, at: now}
		s.window = now
	}
	s.attempts++
	service = s.ServiceMin + time.Duration(s.rng.Float64()*float64(s.ServiceMax-s.ServiceMin))
	if windowed(s.Format) {
		return s.admitWindow(now, h, service)
	}
	s.req.refill(now)
	s.tok.refill(now)
	short := max((1-s.req.level)/s.req.rate, (cost-s.tok.level)/s.tok.rate, 0) // seconds until admitted
	if short > 0 && !s.Queue {
		s.refused++
		s.headers(now, h)
		h.Set("Retry-After", strconv.Itoa(int(math.Ceil(short))))
		return 0, false, 0
	}
	s.req.level--
	s.tok.level -= cost
	s.headers(now, h)
	return time.Duration(short * float64(time.Second)), true, service
}

// admitWindow is admit for fixed windows of a minute.
func (s *Server) admitWindow(now time.Time, h http.Header, service time.Duration) (time.Duration, bool, time.Duration) {
	for now.Sub(s.window) >= time.Minute {
		s.window = s.window.Add(time.Minute)
		s.used = max(s.used-int(s.RPM), 0) // queued requests (Queue only) carry over
	}
	var wait time.Duration
	if s.used >= int(s.RPM) {
		if !s.Queue {
			s.refused++
			s.windowHeaders(now, h)
			h.Set("Retry-After", strconv.Itoa(int(math.Ceil(s.window.Add(time.Minute).Sub(now).Seconds()))))
			return 0, false, 0
		}
		// Queued requests take their turn in the windows to come.
		ahead := s.used - int(s.RPM)
		wait = s.window.Add(time.Minute * time.Duration(1+ahead/int(s.RPM))).Sub(now)
	}
	s.used++
	s.windowHeaders(now, h)
	return wait, true, service
}

// windowHeaders writes the window in the server's format: GitHub's, with
// the end as a Unix time, or the IETF fields, with t the seconds until it,
// rounded up.
func (s *Server) windowHeaders(now time.Time, h http.Header) {
	end := s.window.Add(time.Minute)
	if s.Format == "ietf" {
		h.Set("RateLimit-Policy", fmt.Sprintf(`"rpm";q=%d;w=60`, int(s.RPM)))
		h.Set("RateLimit", fmt.Sprintf(`"rpm";r=%d;t=%d`, max(int(s.RPM)-s.used, 0), int(math.Ceil(end.Sub(now).Seconds()))))
		return
	}
	h.Set("Date", now.UTC().Format(http.TimeFormat))
	h.Set("X-Ratelimit-Limit", strconv.Itoa(int(s.RPM)))
	h.Set("X-Ratelimit-Remaining", strconv.Itoa(max(int(s.RPM)-s.used, 0)))
	h.Set("X-Ratelimit-Used", strconv.Itoa(s.used))
	h.Set("X-Ratelimit-Reset", strconv.FormatInt(end.Unix(), 10))
	h.Set("X-Ratelimit-Resource", "core")
}

// headers writes the token buckets in the server's format.
func (s *Server) headers(now time.Time, h http.Header) {
	rem := func(b *serverBucket) string { return strconv.Itoa(int(max(b.level, 0))) }
	switch s.Format {
	case "openai":
		for _, d := range []struct {
			name string
			b    *serverBucket
		}{{"requests", &s.req}, {"tokens", &s.tok}} {
			h.Set("X-Ratelimit-Limit-"+d.name, strconv.Itoa(int(d.b.limit)))
			h.Set("X-Ratelimit-Remaining-"+d.name, rem(d.b))
			h.Set("X-Ratelimit-Reset-"+d.name, d.b.toFull().Round(time.Millisecond).String())
		}
	case "anthropic":
		// Second precision, as Anthropic sends: the Date is truncated, the
		// resets are rounded up.
		h.Set("Date", now.UTC().Format(http.TimeFormat))
		for _, d := range []struct {
			name string
			b    *serverBucket
		}{{"requests", &s.req}, {"tokens", &s.tok}} {
			h.Set("Anthropic-Ratelimit-"+d.name+"-Limit", strconv.Itoa(int(d.b.limit)))
			h.Set("Anthropic-Ratelimit-"+d.name+"-Remaining", rem(d.b))
			reset := now.Add(d.b.toFull() + time.Second - 1).Truncate(time.Second)
			h.Set("Anthropic-Ratelimit-"+d.name+"-Reset", reset.UTC().Format(time.RFC3339))
		}
	}
}
