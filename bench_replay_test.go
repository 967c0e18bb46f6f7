package retry_test

// Benchmarks of Transport.ReplayBuffer: a 1 MiB upload without GetBody,
// answered 503 then 200 by an in-memory base that reads the whole body on
// every attempt. B/op is what keeping the body costs: at most the body plus
// 8 KiB with a known length, at most 1.25 times the body without one. The
// "off" cases are the same upload with ReplayBuffer zero, sent once:
//
//	go test -run '^$' -bench Replay -benchmem .

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/retrykit/retry"
)

// resetBody is a request body without GetBody that can be rewound between
// iterations without allocating.
type resetBody struct{ bytes.Reader }

func (b *resetBody) Close() error { return nil }

func BenchmarkReplayBuffer(b *testing.B) {
	const size = 1 << 20
	data := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	for _, bc := range []struct {
		name   string
		known  bool
		buffer int64
	}{
		{name: "known/off", known: true},
		{name: "known/on", known: true, buffer: 2 << 20},
		{name: "unknown/off"},
		{name: "unknown/on", buffer: 2 << 20},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var attempt int
			tr := &retry.Transport{
				ReplayBuffer: bc.buffer,
				Policy:       retry.Policy{Sleep: noSleep, Rand: func() float64 { return 0 }},
				Base: baseFunc(func(r *http.Request) (*http.Response, error) {
					n, err := io.Copy(io.Discard, r.Body)
					r.Body.Close()
					if err != nil || n != size {
						b.Fatalf("attempt read %d bytes: %v", n, err)
					}
					attempt++
					code := http.StatusOK
					if attempt%2 == 1 {
						code = http.StatusServiceUnavailable
					}
					return &http.Response{StatusCode: code, Body: http.NoBody, Request: r}, nil
				}),
			}
			body := new(resetBody)
			req, err := http.NewRequest(http.MethodPut, "http://example.test/upload", nil)
			if err != nil {
				b.Fatal(err)
			}
			req.ContentLength = -1
			if bc.known {
				req.ContentLength = size
			}
			b.SetBytes(size)
			b.ReportAllocs()
			for b.Loop() {
				attempt = 0
				body.Reset(data)
				req.Body = body
				resp, err := tr.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				want := http.StatusOK
				if bc.buffer == 0 {
					want = http.StatusServiceUnavailable // sent once
				}
				if resp.StatusCode != want {
					b.Fatalf("status %d, want %d", resp.StatusCode, want)
				}
			}
		})
	}
}
