package interop_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/go-cmp/cmp"
)

// unseekable hides every method of its reader but Read, as a pipe or a
// network stream would.
type unseekable struct{ r io.Reader }

func (u unseekable) Read(p []byte) (int, error) { return u.r.Read(p) }

func TestS3PutObjectSurvivesWithReplayBuffer(t *testing.T) {
	t.Parallel()
	const size = 5 << 20 // above the SDK's 2 MiB threshold for Expect: 100-continue
	payload := make([]byte, size)
	rng := rand.NewChaCha8([32]byte{1})
	_, _ = rng.Read(payload)
	tests := []struct {
		name     string
		proto    proto
		seekable bool
		onlyReq  bool // RequestChecksumCalculationWhenRequired: no trailing checksum
	}{
		// The SDK refuses an unseekable body over plain HTTP: it cannot
		// hash it for the signature, and leaves the payload unsigned only
		// over TLS.
		{name: "unseekable over TLS", proto: overHTTPS},
		{name: "unseekable over HTTP/2", proto: overH2},
		{name: "seekable over TLS", proto: overHTTPS, seekable: true},
		{name: "seekable over HTTP", proto: overHTTP, seekable: true},
		{name: "unseekable over TLS, checksum when required", proto: overHTTPS, onlyReq: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			early := status(503, "<Error><Code>SlowDown</Code></Error>")
			early.Early = true
			e := newS3Env(t, tt.proto, objectPath("big"), early,
				status(503, "<Error><Code>SlowDown</Code></Error>"), fault{ResetAt: 1 << 20})
			e.r.ReplayBuffer = 2 * size
			var body io.Reader = bytes.NewReader(payload)
			if !tt.seekable {
				body = unseekable{body}
			}
			_, err := e.client.PutObject(t.Context(), &s3.PutObjectInput{
				Bucket: aws.String(s3Bucket), Key: aws.String("big"),
				Body: body, ContentLength: aws.Int64(size),
			}, func(o *s3.Options) {
				if tt.onlyReq {
					o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
				}
			})
			if err != nil {
				t.Fatalf("PutObject: %v", err)
			}
			got := e.proxy.Received()
			// The first 503 comes before the body: the SDK asked for
			// 100-continue, so nothing of the body was sent.
			if diff := cmp.Diff([]string{"early status 503", "status 503", "reset at 1048576", "forward"}, faults(got)); diff != "" {
				t.Errorf("sends (-want +got):\n%s", diff)
			}
			// Over TLS the SDK leaves the payload out of the signature, and
			// by default sends it aws-chunked with a trailing checksum
			// (checked by dechunk); over plain HTTP it signs the payload's
			// hash, which checkSigV4 compares with each full body.
			sum := sha256.Sum256(payload)
			wantHash, wantBody := hex.EncodeToString(sum[:]), payload
			switch {
			case tt.proto != overHTTP && tt.onlyReq:
				wantHash = "UNSIGNED-PAYLOAD"
			case tt.proto != overHTTP:
				wantHash, wantBody = "STREAMING-UNSIGNED-PAYLOAD-TRAILER", nil
			}
			for i, g := range got {
				if h := g.Header.Get("X-Amz-Content-Sha256"); h != wantHash {
					t.Errorf("send %d: x-amz-content-sha256 %s, want %s", i+1, h, wantHash)
				}
				if g.Complete && wantBody == nil {
					wantBody = g.Body // the encoding of the payload: every full send must repeat it
				}
			}
			for i, g := range got {
				switch {
				case g.Complete && !bytes.Equal(g.Body, wantBody):
					t.Errorf("send %d: a full body of %d bytes that differs from the first", i+1, len(g.Body))
				case !g.Complete && !bytes.HasPrefix(wantBody, g.Body):
					t.Errorf("send %d: a cut body of %d bytes that is not the full one's start", i+1, len(g.Body))
				}
			}
			if n := e.r.retries(); n != 3 {
				t.Errorf("OnRetry called %d times, want 3", n)
			}
			e.checkSignatures(t)
			obj, err := e.backend.GetObject(s3Bucket, "big", nil)
			if err != nil {
				t.Fatalf("the object was not stored: %v", err)
			}
			defer obj.Contents.Close()
			if stored, _ := io.ReadAll(obj.Contents); !bytes.Equal(stored, payload) {
				t.Errorf("stored %d bytes that differ from the %d sent", len(stored), size)
			}
		})
	}
}

// TestS3PutObjectWithoutReplayBufferIsSentOnce pins what a zero
// ReplayBuffer means for the SDK's uploads: the SDK gives net/http a body
// without GetBody, so a 503 ends the call after one send.
func TestS3PutObjectWithoutReplayBufferIsSentOnce(t *testing.T) {
	t.Parallel()
	e := newS3Env(t, overHTTPS, objectPath("once"), status(503, "<Error><Code>SlowDown</Code></Error>"))
	_, err := e.client.PutObject(t.Context(), &s3.PutObjectInput{
		Bucket: aws.String(s3Bucket), Key: aws.String("once"),
		Body: bytes.NewReader([]byte("hello")), ContentLength: aws.Int64(5),
	})
	var re interface{ HTTPStatusCode() int }
	if !errors.As(err, &re) || re.HTTPStatusCode() != 503 {
		t.Fatalf("PutObject error = %v, want the 503", err)
	}
	if n := len(e.proxy.Received()); n != 1 {
		t.Errorf("server saw %d sends, want 1", n)
	}
	if s := e.r.ft.Sleeps(); len(s) != 0 {
		t.Errorf("slept %v, want no sleep", s)
	}
	e.checkSignatures(t)
}

// TestS3PutObjectPastReplayBufferIsSentOnce: a body longer than
// ReplayBuffer cannot be sent again once the base has read past the limit.
func TestS3PutObjectPastReplayBufferIsSentOnce(t *testing.T) {
	t.Parallel()
	payload := bytes.Repeat([]byte("0123456789abcdef"), 256<<10) // 4 MiB
	e := newS3Env(t, overHTTPS, objectPath("big"), status(503, "<Error><Code>SlowDown</Code></Error>"))
	e.r.ReplayBuffer = 1 << 20
	_, err := e.client.PutObject(t.Context(), &s3.PutObjectInput{
		Bucket: aws.String(s3Bucket), Key: aws.String("big"),
		Body: unseekable{bytes.NewReader(payload)}, ContentLength: aws.Int64(int64(len(payload))),
	})
	var re interface{ HTTPStatusCode() int }
	if !errors.As(err, &re) || re.HTTPStatusCode() != 503 {
		t.Fatalf("PutObject error = %v, want the 503", err)
	}
	got := e.proxy.Received()
	if len(got) != 1 || !got[0].Complete {
		t.Errorf("server saw %v, want one full send", faults(got))
	}
	if s := e.r.ft.Sleeps(); len(s) != 0 {
		t.Errorf("slept %v, want no sleep", s)
	}
	e.checkSignatures(t)
}

// TestS3PutObjectEarlyAnswerMidStream: below the SDK's 100-continue
// threshold the body streams at once, and a server that answers 503 before
// reading it leaves the base with an unknown part of it sent. The next
// attempt must send the kept bytes and then the rest of the original.
func TestS3PutObjectEarlyAnswerMidStream(t *testing.T) {
	t.Parallel()
	for _, pr := range []proto{overHTTPS, overH2} {
		t.Run(string(pr), func(t *testing.T) {
			t.Parallel()
			earlyAnswerMidStream(t, pr)
		})
	}
}

// earlyAnswerMidStream runs TestS3PutObjectEarlyAnswerMidStream over pr.
func earlyAnswerMidStream(t *testing.T, pr proto) {
	payload := bytes.Repeat([]byte("abcdefghijklmnop"), 96<<10) // 1.5 MiB
	early := status(503, "<Error><Code>SlowDown</Code></Error>")
	early.Early = true
	e := newS3Env(t, pr, objectPath("mid"), early, early)
	e.r.ReplayBuffer = 2 << 20
	_, err := e.client.PutObject(t.Context(), &s3.PutObjectInput{
		Bucket: aws.String(s3Bucket), Key: aws.String("mid"),
		Body: unseekable{bytes.NewReader(payload)}, ContentLength: aws.Int64(int64(len(payload))),
	})
	if err != nil {
		t.Fatalf("PutObject: %v", err)
	}
	got := e.proxy.Received()
	if n := len(got); n != 3 || !got[n-1].Complete {
		t.Errorf("server saw %v, want two early 503s and one full send", faults(got))
	}
	e.checkSignatures(t)
	obj, err := e.backend.GetObject(s3Bucket, "mid", nil)
	if err != nil {
		t.Fatalf("the object was not stored: %v", err)
	}
	defer obj.Contents.Close()
	if stored, _ := io.ReadAll(obj.Contents); !bytes.Equal(stored, payload) {
		t.Errorf("stored %d bytes that differ from the %d sent", len(stored), len(payload))
	}
}

// TestS3ConcurrentUploads shares one client, and so one Transport, among
// goroutines whose uploads meet 503s, early answers and resets in
// whatever order they arrive.
func TestS3ConcurrentUploads(t *testing.T) {
	t.Parallel()
	for _, pr := range []proto{overHTTPS, overH2} {
		t.Run(string(pr), func(t *testing.T) {
			t.Parallel()
			concurrentUploads(t, pr)
		})
	}
}

// concurrentUploads runs TestS3ConcurrentUploads over pr; over HTTP/2 the
// uploads share one connection, and a reset ends one stream.
func concurrentUploads(t *testing.T, pr proto) {
	const uploads, size = 8, 384 << 10
	early := status(503, "<Error><Code>SlowDown</Code></Error>")
	early.Early = true
	var script []fault
	for range uploads / 2 {
		script = append(script, status(503, ""), fault{ResetAt: 100 << 10}, early)
	}
	isObject := func(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/"+s3Bucket+"/up-") }
	e := newS3Env(t, pr, isObject, script...)
	// The aws-chunked encoding of a body is a little longer than the body.
	e.r.ReplayBuffer = size + 4<<10
	e.r.Policy.MaxAttempts = 2 * uploads // every fault may land on one upload

	payloads := make(map[string][]byte)
	for i := range uploads {
		p := make([]byte, size)
		rng := rand.NewChaCha8([32]byte{byte(i)})
		_, _ = rng.Read(p)
		payloads["up-"+strconv.Itoa(i)] = p
	}
	var wg sync.WaitGroup
	for key, p := range payloads {
		wg.Go(func() {
			_, err := e.client.PutObject(t.Context(), &s3.PutObjectInput{
				Bucket: aws.String(s3Bucket), Key: aws.String(key),
				Body: unseekable{bytes.NewReader(p)}, ContentLength: aws.Int64(size),
			})
			if err != nil {
				t.Errorf("PutObject %s: %v", key, err)
			}
		})
	}
	wg.Wait()
	// What was sent of each upload: its encoding (aws-chunked), the same
	// on every full send, and a start of it on every cut one. Whether the
	// encoding holds the payload, dechunk and the stored objects tell.
	sent := make(map[string][]byte)
	got := e.proxy.Received()
	for _, g := range got {
		if g.Complete && sent[g.Path] == nil {
			sent[g.Path] = g.Body
		}
	}
	for i, g := range got {
		switch {
		case g.Complete && !bytes.Equal(g.Body, sent[g.Path]):
			t.Errorf("send %d (%s): a full body that differs from the first", i+1, g.Path)
		case !g.Complete && !bytes.HasPrefix(sent[g.Path], g.Body):
			t.Errorf("send %d (%s): a cut body that is not the full one's start", i+1, g.Path)
		}
	}
	e.checkSignatures(t)
	for key, p := range payloads {
		obj, err := e.backend.GetObject(s3Bucket, key, nil)
		if err != nil {
			t.Errorf("%s was not stored: %v", key, err)
			continue
		}
		stored, _ := io.ReadAll(obj.Contents)
		obj.Contents.Close()
		if !bytes.Equal(stored, p) {
			t.Errorf("%s: stored %d bytes that differ from the payload", key, len(stored))
		}
	}
}
