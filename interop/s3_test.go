package interop_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/go-cmp/cmp"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/retrykit/retry"
)

const s3Bucket = "interop"

// s3Env is a gofakes3 server behind a faultProxy that checks the SigV4
// signature of every request, and an S3 client that sends through a
// retry.Transport with the SDK's retryer off.
type s3Env struct {
	proto   proto
	proxy   *faultProxy
	backend *s3mem.Backend
	r       *retrier
	client  *s3.Client
}

// newS3Env starts the servers, speaking pr, with script applied to the
// requests match accepts, and builds the client.
func newS3Env(t *testing.T, pr proto, match func(*http.Request) bool, script ...fault) *s3Env {
	t.Helper()
	backend := s3mem.New()
	if err := backend.CreateBucket(s3Bucket); err != nil {
		t.Fatal(err)
	}
	faker := gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog()))
	opts := pr.opts()
	opts.Match, opts.Check = match, checkSigV4
	proxy := newFaultProxy(t, dechunk(faker.Server()), opts, script...)

	r := newRetrier()
	r.setBase(t, transportFor(proxy))
	client := s3.New(s3.Options{
		Region:       s3Region,
		Credentials:  credentials.NewStaticCredentialsProvider(s3AccessKey, s3Secret, ""),
		BaseEndpoint: aws.String(proxy.URL),
		UsePathStyle: true,
		HTTPClient:   r.client(),
		Retryer:      aws.NopRetryer{}, // the SDK's retries off: the Transport retries
		// What config.LoadDefaultConfig gives: a checksum on every upload,
		// over TLS in a trailer of the aws-chunked encoding.
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenSupported,
	})
	return &s3Env{proto: pr, proxy: proxy, backend: backend, r: r, client: client}
}

// put stores an object directly in the backend, past the proxy.
func (e *s3Env) put(t *testing.T, key string, data []byte) {
	t.Helper()
	if _, err := e.backend.PutObject(s3Bucket, key, map[string]string{}, bytes.NewReader(data), int64(len(data)), nil); err != nil {
		t.Fatal(err)
	}
}

// checkSignatures fails the test for every request whose SigV4 check
// failed, or that came by another protocol than the one asked for.
func (e *s3Env) checkSignatures(t *testing.T) {
	t.Helper()
	want := e.proto.wire()
	for i, g := range e.proxy.Received() {
		if g.CheckErr != nil {
			t.Errorf("send %d (%s %s, %s): %v", i+1, g.Method, g.Path, g.Fault, g.CheckErr)
		}
		if g.Proto != want {
			t.Errorf("send %d came over %s, want %s", i+1, g.Proto, want)
		}
	}
}

// objectPath matches requests on one object of the test bucket.
func objectPath(key string) func(*http.Request) bool {
	return func(r *http.Request) bool { return r.URL.Path == "/"+s3Bucket+"/"+key }
}

func TestS3ReadsAndDeletesSurvive(t *testing.T) {
	t.Parallel()
	data := []byte(strings.Repeat("retry me ", 1000))
	type op func(t *testing.T, e *s3Env) error
	getObject := func(t *testing.T, e *s3Env) error {
		out, err := e.client.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(s3Bucket), Key: aws.String("k")})
		if err != nil {
			return err
		}
		defer out.Body.Close()
		got, err := io.ReadAll(out.Body)
		if err == nil && !bytes.Equal(got, data) {
			t.Errorf("GetObject read %d bytes, want the %d stored", len(got), len(data))
		}
		return err
	}
	listObjects := func(t *testing.T, e *s3Env) error {
		out, err := e.client.ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: aws.String(s3Bucket)})
		if err != nil {
			return err
		}
		if len(out.Contents) != 1 || aws.ToString(out.Contents[0].Key) != "k" {
			t.Errorf("ListObjectsV2 listed %d objects, want only k", len(out.Contents))
		}
		return nil
	}
	deleteObject := func(t *testing.T, e *s3Env) error {
		_, err := e.client.DeleteObject(t.Context(), &s3.DeleteObjectInput{Bucket: aws.String(s3Bucket), Key: aws.String("k")})
		if err == nil {
			if _, err := e.backend.HeadObject(s3Bucket, "k"); err == nil {
				t.Error("DeleteObject succeeded but the object is still there")
			}
		}
		return err
	}
	bucketPath := func(r *http.Request) bool { return r.URL.Path == "/"+s3Bucket || r.URL.Path == "/"+s3Bucket+"/" }
	s503 := status(503, "<Error><Code>SlowDown</Code></Error>")
	tests := []struct {
		name       string
		op         op
		match      func(*http.Request) bool
		script     []fault
		wantFaults []string
	}{{
		name:       "GetObject/503 twice",
		op:         getObject,
		match:      objectPath("k"),
		script:     []fault{s503, s503},
		wantFaults: []string{"status 503", "status 503", "forward"},
	}, {
		name:       "GetObject/resets",
		op:         getObject,
		match:      objectPath("k"),
		script:     []fault{{ResetBefore: true}, {ResetAfter: true}},
		wantFaults: []string{"reset before", "reset after", "forward"},
	}, {
		name:       "ListObjectsV2/503 then reset",
		op:         listObjects,
		match:      bucketPath,
		script:     []fault{s503, {ResetAfter: true}},
		wantFaults: []string{"status 503", "reset after", "forward"},
	}, {
		name:       "DeleteObject/503 then reset before",
		op:         deleteObject,
		match:      objectPath("k"),
		script:     []fault{s503, {ResetBefore: true}},
		wantFaults: []string{"status 503", "reset before", "forward"},
	}, {
		// The first delete took effect; the second finds nothing to
		// delete, which S3 answers with 204 all the same.
		name:       "DeleteObject/reset after processing",
		op:         deleteObject,
		match:      objectPath("k"),
		script:     []fault{{ResetAfter: true}},
		wantFaults: []string{"reset after", "forward"},
	}}
	for _, tt := range tests {
		for _, pr := range []proto{overHTTP, overHTTPS, overH2} {
			t.Run(tt.name+"/"+string(pr), func(t *testing.T) {
				t.Parallel()
				e := newS3Env(t, pr, tt.match, tt.script...)
				e.put(t, "k", data)
				if err := tt.op(t, e); err != nil {
					t.Fatalf("call failed: %v", err)
				}
				if diff := cmp.Diff(tt.wantFaults, faults(e.proxy.Received())); diff != "" {
					t.Errorf("sends (-want +got):\n%s", diff)
				}
				if got, want := e.r.retries(), len(tt.wantFaults)-1; got != want {
					t.Errorf("OnRetry called %d times, want %d", got, want)
				}
				e.checkSignatures(t)
			})
		}
	}
}

// TestS3GetObjectRetriesRunOut: when every attempt meets a 503, the last
// response reaches the SDK, which makes its error of it.
func TestS3GetObjectRetriesRunOut(t *testing.T) {
	t.Parallel()
	s503 := status(503, "<Error><Code>SlowDown</Code><Message>Reduce your request rate.</Message></Error>")
	e := newS3Env(t, overHTTP, objectPath("k"), s503, s503, s503, s503, s503)
	e.put(t, "k", []byte("never read"))
	_, err := e.client.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(s3Bucket), Key: aws.String("k")})
	var re interface{ HTTPStatusCode() int }
	if !errors.As(err, &re) || re.HTTPStatusCode() != 503 {
		t.Fatalf("GetObject error = %v, want the SDK's error for the last 503", err)
	}
	if !strings.Contains(err.Error(), "SlowDown") {
		t.Errorf("GetObject error = %v, want the last response's body (SlowDown) read by the SDK", err)
	}
	if n := len(e.proxy.Received()); n != retry.DefaultMaxAttempts {
		t.Errorf("server saw %d sends, want %d", n, retry.DefaultMaxAttempts)
	}
	want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second}
	if diff := cmp.Diff(want, e.r.ft.Sleeps()); diff != "" {
		t.Errorf("sleeps (-want +got):\n%s", diff)
	}
	e.checkSignatures(t)
}
