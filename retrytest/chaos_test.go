package retrytest

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"testing"
	"time"
)

func TestDribbleSendsAHugeBodySlowly(t *testing.T) {
	const dribble = 20 * time.Millisecond
	s := NewServer(t, Step{Status: 503, Body: "start", BodySize: 1 << 30, Dribble: dribble})
	resp, err := s.Client().Get(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if got, want := resp.ContentLength, int64(1<<30); got != want {
		t.Errorf("ContentLength = %d, want %d", got, want)
	}
	begin := time.Now()
	buf := make([]byte, 5+3*32<<10)
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(buf, []byte("start")) {
		t.Errorf("body starts %q, want %q", buf[:5], "start")
	}
	if took := time.Since(begin); took < 2*dribble {
		t.Errorf("3 chunks arrived in %v, want at least %v between chunks", took, dribble)
	}
}

func TestDribbleCompletesASmallBody(t *testing.T) {
	const size = 100 << 10
	s := NewServer(t, Step{BodySize: size, Dribble: time.Millisecond})
	resp, err := s.Client().Get(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil || n != size {
		t.Errorf("read %d bytes, %v; want %d, nil", n, err, size)
	}
}

func TestCloseIdleConnsForcesANewConnection(t *testing.T) {
	s := NewServer(t)
	get := func() {
		t.Helper()
		resp, err := s.Client().Get(s.URL)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	get()
	get()
	if got := s.Conns(); got != 1 {
		t.Fatalf("after two requests Conns() = %d, want 1 (kept alive)", got)
	}
	// The server marks the connection idle just after the response is
	// written, which may come after the client has read it.
	var closed int
	for wait := time.Now().Add(time.Second); closed == 0 && time.Now().Before(wait); {
		closed = s.CloseIdleConns()
		time.Sleep(time.Millisecond)
	}
	if closed != 1 {
		t.Fatalf("CloseIdleConns() = %d, want 1", closed)
	}
	get()
	if got := s.Conns(); got != 2 {
		t.Errorf("after CloseIdleConns Conns() = %d, want 2", got)
	}
	if got := s.CloseIdleConns(); got > 1 {
		t.Errorf("second CloseIdleConns() = %d, want at most 1", got)
	}
}

func TestResetRequestAfterCutsTheUpload(t *testing.T) {
	const cut = 64 << 10
	s := NewServer(t, Step{ResetRequestAfter: cut})
	body := bytes.Repeat([]byte("x"), 8<<20)
	resp, err := s.Client().Post(s.URL, "application/octet-stream", bytes.NewReader(body))
	if err == nil {
		resp.Body.Close()
		t.Fatal("POST succeeded, want a connection error")
	}
	got := s.Received()
	if len(got) != 1 {
		t.Fatalf("server received %d requests, want 1", len(got))
	}
	if len(got[0].Body) != cut {
		t.Errorf("server read %d bytes of the body, want %d", len(got[0].Body), cut)
	}
}

func TestStatusPassesHostileRetryAfterVerbatim(t *testing.T) {
	values := []string{
		"soon", "-5", "123456789012345678901234567890", "Wed, 21 Oct 2015 07:28:00 GMT",
		"1.5", "1e3", "", strconv.Itoa(1_700_000_000),
	}
	for _, v := range values {
		t.Run(v, func(t *testing.T) {
			s := NewServer(t, Status(429, "Retry-After", v))
			resp, err := s.Client().Get(s.URL)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 429 {
				t.Errorf("status %d, want 429", resp.StatusCode)
			}
			if got := resp.Header.Values("Retry-After"); len(got) != 1 || got[0] != v {
				t.Errorf("Retry-After = %q, want [%q]", got, v)
			}
		})
	}
}

func TestDribbleStopsWhenTheClientLeaves(t *testing.T) {
	s := NewServer(t, Step{BodySize: 1 << 30, Dribble: time.Hour})
	resp, err := s.Client().Get(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, resp.Body)
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
	resp.Body.Close()
	select {
	case err := <-done:
		if err == nil || errors.Is(err, io.EOF) {
			t.Errorf("reading a closed dribbled body ended with %v, want an error", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("read still blocked 5s after Close")
	}
}
