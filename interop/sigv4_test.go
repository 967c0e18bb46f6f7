package interop_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// The credentials and region of the S3 tests, known to the server side so
// it can check signatures.
const (
	s3AccessKey = "AKIDINTEROPTEST"
	s3Secret    = "interop/secret/key/not/a/real/one"
	s3Region    = "us-east-1"
)

// checkSigV4 verifies the AWS Signature Version 4 of a request as it
// arrived: it signs again, with the SDK's own signer, a request holding only
// what arrived (method, host, path, query and the headers the signature
// names), and compares the Authorization headers. When the payload is
// signed (x-amz-content-sha256 is a hash), it also checks that the body
// that arrived has that hash; pass complete false for a body cut short.
func checkSigV4(r *http.Request, body []byte, complete bool) error {
	auth := r.Header.Get("Authorization")
	rest, ok := strings.CutPrefix(auth, "AWS4-HMAC-SHA256 ")
	if !ok {
		return fmt.Errorf("authorization %q is not SigV4", auth)
	}
	var signed []string
	for _, part := range strings.Split(rest, ", ") {
		if v, ok := strings.CutPrefix(part, "SignedHeaders="); ok {
			signed = strings.Split(v, ";")
		}
	}
	if len(signed) == 0 {
		return fmt.Errorf("authorization %q names no signed header", auth)
	}
	when, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return fmt.Errorf("x-amz-date: %v", err)
	}
	payloadHash := r.Header.Get("X-Amz-Content-Sha256")
	if payloadHash == "" {
		return errors.New("no x-amz-content-sha256")
	}
	if _, err := hex.DecodeString(payloadHash); err == nil && complete {
		if sum := sha256.Sum256(body); hex.EncodeToString(sum[:]) != payloadHash {
			return fmt.Errorf("body of %d bytes does not have the signed hash %s", len(body), payloadHash)
		}
	}

	u, err := url.Parse("http://" + r.Host + r.RequestURI)
	if err != nil {
		return err
	}
	again := &http.Request{Method: r.Method, URL: u, Host: r.Host, Header: make(http.Header)}
	for _, h := range signed {
		switch h {
		case "host":
		case "content-length":
			again.ContentLength = r.ContentLength
		default:
			again.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
		}
	}
	creds := aws.Credentials{AccessKeyID: s3AccessKey, SecretAccessKey: s3Secret}
	signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true }) // as S3 signs
	if err := signer.SignHTTP(context.Background(), creds, again, payloadHash, "s3", s3Region, when); err != nil {
		return err
	}
	if want := again.Header.Get("Authorization"); want != auth {
		return fmt.Errorf("signature does not verify:\n got  %s\n want %s", auth, want)
	}
	return nil
}

// TestCheckSigV4CatchesTampering makes sure the check can fail: a request
// signed by the SDK's signer passes it, and any change to what the
// signature covers does not.
func TestCheckSigV4CatchesTampering(t *testing.T) {
	t.Parallel()
	body := []byte("signed body")
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	sign := func() *http.Request {
		r := httptest.NewRequest(http.MethodPut, "/interop/key%20one?x-id=PutObject", bytes.NewReader(body))
		r.Header.Set("X-Amz-Content-Sha256", hash)
		r.Header.Set("Content-Type", "text/plain")
		creds := aws.Credentials{AccessKeyID: s3AccessKey, SecretAccessKey: s3Secret}
		signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
		if err := signer.SignHTTP(t.Context(), creds, r, hash, "s3", s3Region, time.Now()); err != nil {
			t.Fatal(err)
		}
		return r
	}
	if err := checkSigV4(sign(), body, true); err != nil {
		t.Fatalf("an untouched request fails the check: %v", err)
	}
	tests := []struct {
		name   string
		tamper func(r *http.Request) []byte
	}{
		{name: "body", tamper: func(*http.Request) []byte { return []byte("signed bodY") }},
		{name: "signed header", tamper: func(r *http.Request) []byte { r.Header.Set("Content-Type", "text/html"); return body }},
		{name: "path", tamper: func(r *http.Request) []byte { r.RequestURI = "/interop/key%20two?x-id=PutObject"; return body }},
		{name: "query", tamper: func(r *http.Request) []byte { r.RequestURI = "/interop/key%20one?x-id=GetObject"; return body }},
		{name: "method", tamper: func(r *http.Request) []byte { r.Method = http.MethodPost; return body }},
		{name: "date", tamper: func(r *http.Request) []byte {
			r.Header.Set("X-Amz-Date", time.Now().Add(time.Hour).UTC().Format("20060102T150405Z"))
			return body
		}},
		{name: "no signature", tamper: func(r *http.Request) []byte { r.Header.Del("Authorization"); return body }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := sign()
			if err := checkSigV4(r, tt.tamper(r), true); err == nil {
				t.Error("a tampered request passes the check")
			}
		})
	}
}
