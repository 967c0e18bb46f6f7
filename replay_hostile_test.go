package retry_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/retrykit/retry"
)

// Hostile cases for Transport.ReplayBuffer: bases that read part of the
// body, never read it, close it late or from another goroutine, keep
// reading after the attempt, or re-send it themselves; bodies that fail.

// hostileBase is one attempt of a base RoundTripper in a scripted
// misbehaviour; it returns the bytes it read.
type hostileBase func(r *http.Request) ([]byte, *http.Response, error)

func TestReplayBufferHostileBases(t *testing.T) {
	t.Parallel()
	const size = 100 << 10
	readAll := func(r *http.Request) ([]byte, *http.Response, error) {
		b, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return b, nil, err
		}
		return b, &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
	}
	tests := []struct {
		name  string
		first hostileBase
	}{
		{name: "reads part, then fails", first: func(r *http.Request) ([]byte, *http.Response, error) {
			b := make([]byte, 3000)
			n, _ := io.ReadFull(r.Body, b)
			r.Body.Close()
			return b[:n], nil, syscall.ECONNRESET
		}},
		{name: "never reads", first: func(r *http.Request) ([]byte, *http.Response, error) {
			r.Body.Close()
			return nil, &http.Response{StatusCode: 503, Body: http.NoBody, Request: r}, nil
		}},
		{name: "reads in one-byte steps, then answers 503", first: func(r *http.Request) ([]byte, *http.Response, error) {
			var got []byte
			b := make([]byte, 1)
			for range 777 {
				n, _ := r.Body.Read(b)
				got = append(got, b[:n]...)
			}
			r.Body.Close()
			return got, &http.Response{StatusCode: 503, Body: http.NoBody, Request: r}, nil
		}},
		{name: "closes late, from another goroutine", first: func(r *http.Request) ([]byte, *http.Response, error) {
			b := make([]byte, 5000)
			n, _ := io.ReadFull(r.Body, b)
			done := make(chan struct{})
			go func() { defer close(done); r.Body.Close() }()
			<-done
			return b[:n], nil, io.ErrUnexpectedEOF
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			want := payload(size)
			body := newTrackedBody(bytes.NewReader(want))
			var got [][]byte
			var lengths []int64
			tr := &retry.Transport{Policy: replayPolicy(), ReplayBuffer: 1 << 20,
				Base: baseFunc(func(r *http.Request) (*http.Response, error) {
					lengths = append(lengths, r.ContentLength)
					step := readAll
					if len(got) == 0 {
						step = tt.first
					}
					b, resp, err := step(r)
					got = append(got, b)
					return resp, err
				})}
			resp, err := tr.RoundTrip(bodyRequest(t, http.MethodPut, "http://example.test/", body, size, true))
			if err != nil {
				t.Fatalf("RoundTrip: %v", err)
			}
			if resp.StatusCode != 200 || len(got) != 2 {
				t.Fatalf("status %d after %d attempts, want 200 after 2", resp.StatusCode, len(got))
			}
			if !bytes.Equal(got[0], want[:len(got[0])]) || !bytes.Equal(got[1], want) {
				t.Errorf("attempts read %d and %d bytes, not the body's", len(got[0]), len(got[1]))
			}
			if diff := cmp.Diff([]int64{size, size}, lengths); diff != "" {
				t.Errorf("ContentLength (-want +got):\n%s", diff)
			}
			if closes, late := body.counts(); closes != 1 || late != 0 {
				t.Errorf("original body: %d closes and %d reads after Close, want 1 and 0", closes, late)
			}
		})
	}
}

// errReader returns its bytes, then err.
type errReader struct {
	b   []byte
	err error
}

func (r *errReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, r.err
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

func TestReplayBufferBodyReadErrorIsNotRetried(t *testing.T) {
	t.Parallel()
	errDisk := errors.New("disk failed")
	body := newTrackedBody(&errReader{b: payload(10 << 10), err: errDisk})
	var attempts int
	tr := &retry.Transport{Policy: replayPolicy(), ReplayBuffer: 1 << 20,
		Base: baseFunc(func(r *http.Request) (*http.Response, error) {
			attempts++
			_, err := io.ReadAll(r.Body)
			r.Body.Close()
			// A base that reports the body's failure as a retryable one.
			return nil, fmt.Errorf("%w: %w", io.ErrUnexpectedEOF, err)
		})}
	_, err := tr.RoundTrip(bodyRequest(t, http.MethodPut, "http://example.test/", body, 0, false))
	if !errors.Is(err, errDisk) {
		t.Errorf("err = %v, want the body's error", err)
	}
	if attempts != 1 {
		t.Errorf("%d attempts, want 1: the body fails the same way every time", attempts)
	}
	if closes, late := body.counts(); closes != 1 || late != 0 {
		t.Errorf("original body: %d closes and %d reads after Close, want 1 and 0", closes, late)
	}
}

// TestReplayBufferStaleReader plays net/http's writer goroutine, which may
// go on reading an attempt's body after RoundTrip returned: here it waits
// in a read of a pipe while the next attempt begins. The next attempt must
// neither block on it nor lose the bytes it took.
func TestReplayBufferStaleReader(t *testing.T) {
	t.Parallel()
	pr, pw := io.Pipe()
	body := newTrackedBody(pr)
	want := payload(64 << 10)
	staleDone := make(chan error, 1)
	var attempts atomic.Int32
	var got []byte
	tr := &retry.Transport{Policy: replayPolicy(), ReplayBuffer: 1 << 20,
		Base: baseFunc(func(r *http.Request) (*http.Response, error) {
			if attempts.Add(1) == 1 {
				started := make(chan struct{})
				go func() { // the stale writer
					close(started)
					_, err := io.Copy(io.Discard, r.Body)
					staleDone <- err
				}()
				<-started
				return nil, syscall.ECONNRESET
			}
			go func() { // data arrives only now
				_, _ = pw.Write(want)
				_ = pw.Close()
			}()
			b, err := io.ReadAll(r.Body)
			r.Body.Close()
			got = b
			if err != nil {
				return nil, err
			}
			return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
		})}
	req := bodyRequest(t, http.MethodPut, "http://example.test/", body, 0, false)
	done := make(chan struct{})
	var resp *http.Response
	var err error
	go func() { defer close(done); resp, err = tr.RoundTrip(req) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("RoundTrip blocked behind the stale reader")
	}
	if err != nil {
		t.Fatalf("RoundTrip: %v", err)
	}
	if resp.StatusCode != 200 || !bytes.Equal(got, want) {
		t.Errorf("status %d, second attempt read %d bytes, want 200 and the %d written", resp.StatusCode, len(got), len(want))
	}
	select {
	case err := <-staleDone:
		if err == nil {
			t.Error("the stale reader read the body to its end, want an error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stale reader never returned")
	}
	body.waitClosed(t)
}

func TestReplayBufferCancelledBeforeAnyAttempt(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	body := newTrackedBody(strings.NewReader("never sent"))
	var sends int
	tr := &retry.Transport{Policy: replayPolicy(), ReplayBuffer: 1 << 20,
		Base: baseFunc(func(*http.Request) (*http.Response, error) {
			sends++
			return nil, errors.New("unreachable")
		})}
	req := bodyRequest(t, http.MethodPut, "http://example.test/", body, 10, true).WithContext(ctx)
	_, err := tr.RoundTrip(req)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if sends != 0 {
		t.Errorf("%d sends, want none", sends)
	}
	if closes, late := body.counts(); closes != 1 || late != 0 {
		t.Errorf("original body: %d closes and %d reads after Close, want 1 and 0", closes, late)
	}
}

// TestReplayBufferLendsGetBody: within one attempt, the base may re-send
// the body through the attempt's GetBody, as net/http does after a refused
// HTTP/2 stream, and gets the whole body again.
func TestReplayBufferLendsGetBody(t *testing.T) {
	t.Parallel()
	want := payload(30 << 10)
	body := newTrackedBody(bytes.NewReader(want))
	var first, second []byte
	var attempts int
	tr := &retry.Transport{Policy: replayPolicy(), ReplayBuffer: 1 << 20,
		Base: baseFunc(func(r *http.Request) (*http.Response, error) {
			attempts++
			if r.GetBody == nil {
				return nil, errors.New("no GetBody on the attempt")
			}
			b := make([]byte, 1000)
			n, _ := io.ReadFull(r.Body, b)
			first = b[:n]
			r.Body.Close()
			again, err := r.GetBody()
			if err != nil {
				return nil, err
			}
			second, err = io.ReadAll(again)
			again.Close()
			if err != nil {
				return nil, err
			}
			return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
		})}
	req := bodyRequest(t, http.MethodPut, "http://example.test/", body, len(want), true)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("RoundTrip: %v", err)
	}
	resp.Body.Close()
	if attempts != 1 || !bytes.Equal(first, want[:1000]) || !bytes.Equal(second, want) {
		t.Errorf("%d attempts; read %d bytes, then %d through GetBody; want 1 attempt, 1000, then the %d of the body",
			attempts, len(first), len(second), len(want))
	}
	if req.GetBody != nil {
		t.Error("the caller's request gained a GetBody")
	}
	if closes, late := body.counts(); closes != 1 || late != 0 {
		t.Errorf("original body: %d closes and %d reads after Close, want 1 and 0", closes, late)
	}
}

// TestReplayBufferClosesAfterLateUpload: the base answers before it has
// sent the whole body and goes on sending it, as net/http does when a
// server answers early. The original body must stay open until the base
// closes the last attempt's body, and then be closed once.
func TestReplayBufferClosesAfterLateUpload(t *testing.T) {
	t.Parallel()
	want := payload(40 << 10)
	body := newTrackedBody(bytes.NewReader(want))
	proceed := make(chan struct{})
	uploaded := make(chan []byte, 1)
	var attempts int
	tr := &retry.Transport{Policy: replayPolicy(), ReplayBuffer: 1 << 20,
		Base: baseFunc(func(r *http.Request) (*http.Response, error) {
			attempts++
			if attempts == 1 {
				b := make([]byte, 100)
				_, _ = io.ReadFull(r.Body, b)
				r.Body.Close()
				return nil, syscall.ECONNRESET
			}
			go func() { // the writer, still sending after the answer
				<-proceed
				b, _ := io.ReadAll(r.Body)
				r.Body.Close()
				uploaded <- b
			}()
			return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
		})}
	resp, err := tr.RoundTrip(bodyRequest(t, http.MethodPut, "http://example.test/", body, len(want), true))
	if err != nil {
		t.Fatalf("RoundTrip: %v", err)
	}
	resp.Body.Close()
	if closes, _ := body.counts(); closes != 0 {
		t.Fatalf("the original body was closed %d times while the upload goes on", closes)
	}
	close(proceed)
	if got := <-uploaded; !bytes.Equal(got, want) {
		t.Errorf("the late upload sent %d bytes, not the %d of the body", len(got), len(want))
	}
	body.waitClosed(t)
	if closes, late := body.counts(); closes != 1 || late != 0 {
		t.Errorf("original body: %d closes and %d reads after Close, want 1 and 0", closes, late)
	}
}
