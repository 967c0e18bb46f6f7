package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Phase is a stretch of the run during which the server's capacity holds
// still.
type Phase struct {
	C   int           // requests the server serves at a time
	For time.Duration // how long the phase lasts
}

// The bodies the server answers with. The overload is Anthropic's, word
// for word: a 529 with no rate-limit headers and no Retry-After.
const (
	overloadedBody = `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`
	messageBody    = `{"id":"msg_simulated","type":"message","role":"assistant","model":"claude-sonnet-4-5",` +
		`"content":[{"type":"text","text":"Hello."}],"stop_reason":"end_turn","usage":{"input_tokens":8,"output_tokens":3}}`
)

// StatusOverloaded is the status of Anthropic's overload, which net/http
// has no name for.
const StatusOverloaded = 529

// Server is an in-memory API that serves at most C requests at a time,
// where C follows a list of phases, and answers every request above C at
// once with Anthropic's overload (a 529 after Refuse). An admitted request
// takes Service and is answered 200; a request already admitted when C
// drops is finished all the same. C stays at the last phase's value after
// the last phase.
//
// It is an http.RoundTripper, so a client sends to it without a network,
// and it waits on the time package, so under testing/synctest its waits
// take no real time. It records every attempt and every service for the
// measurements. A Server is safe for concurrent use by multiple
// goroutines; NewServer makes one.
type Server struct {
	phases  []Phase
	service time.Duration
	refuse  time.Duration
	start   time.Time

	mu        sync.Mutex // protects the fields below
	inService int
	attempts  []attempt
	services  []service
}

// attempt is one request as the server received it.
type attempt struct {
	at      time.Duration // since the server's start
	refused bool          // answered 529
}

// service is one admitted request's time in service.
type service struct {
	from, to time.Duration // since the server's start
	ok       bool          // finished and answered 200, rather than cut short by its context
}

// NewServer returns a server whose first phase begins now.
func NewServer(phases []Phase, serviceTime, refuse time.Duration) *Server {
	return &Server{phases: phases, service: serviceTime, refuse: refuse, start: time.Now()}
}

// End is when the last phase ends.
func (s *Server) End() time.Time {
	var d time.Duration
	for _, p := range s.phases {
		d += p.For
	}
	return s.start.Add(d)
}

// Capacity returns C at t: how many requests the server serves at a time.
func (s *Server) Capacity(t time.Time) int {
	c, _ := s.phaseAt(t)
	return c
}

// untilChange returns the time from t to the next change of C, and false
// when there is none.
func (s *Server) untilChange(t time.Time) (time.Duration, bool) {
	_, next := s.phaseAt(t)
	if next.IsZero() {
		return 0, false
	}
	return next.Sub(t), true
}

// phaseAt returns C at t and when the phase holding t ends (zero for the
// last phase, which lasts).
func (s *Server) phaseAt(t time.Time) (int, time.Time) {
	end := s.start
	for i, p := range s.phases {
		end = end.Add(p.For)
		if t.Before(end) && i < len(s.phases)-1 {
			return p.C, end
		}
	}
	return s.phases[len(s.phases)-1].C, time.Time{}
}

// InService returns the requests in service now.
func (s *Server) InService() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inService
}

// RoundTrip admits req if fewer than C requests are in service and serves
// it, or refuses it with a 529.
func (s *Server) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		// The RoundTripper contract: the base reads and closes the body.
		_, _ = io.Copy(io.Discard, req.Body)
		_ = req.Body.Close()
	}
	from, ok := s.admit(time.Now())
	if !ok {
		if err := sleep(req.Context(), s.refuse); err != nil {
			return nil, err
		}
		return respond(req, StatusOverloaded, overloadedBody), nil
	}
	err := sleep(req.Context(), s.service)
	s.finish(from, time.Now(), err == nil)
	if err != nil {
		return nil, err
	}
	return respond(req, http.StatusOK, messageBody), nil
}

// admit records an attempt at now and takes a place in service for it if
// one is free. It returns when the service began, since the start.
func (s *Server) admit(now time.Time) (time.Duration, bool) {
	at := now.Sub(s.start)
	c := s.Capacity(now)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inService >= c {
		s.attempts = append(s.attempts, attempt{at: at, refused: true})
		return 0, false
	}
	s.inService++
	s.attempts = append(s.attempts, attempt{at: at})
	return at, true
}

// finish gives back the place in service taken at from.
func (s *Server) finish(from time.Duration, now time.Time, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inService--
	s.services = append(s.services, service{from: from, to: now.Sub(s.start), ok: ok})
}

// record returns copies of what the server saw.
func (s *Server) record() ([]attempt, []service) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]attempt(nil), s.attempts...), append([]service(nil), s.services...)
}

func respond(req *http.Request, code int, body string) *http.Response {
	text := http.StatusText(code)
	if code == StatusOverloaded {
		text = "Overloaded"
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	return &http.Response{StatusCode: code, Status: fmt.Sprintf("%d %s", code, text), Header: h,
		Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)),
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
