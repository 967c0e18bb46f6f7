package proxies_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/retrykit/retry"
)

// maxAttempts is every test client's Policy.MaxAttempts.
const maxAttempts = 5

// clientOpts configure a test client's retry.Transport.
type clientOpts struct {
	Replayable func(*http.Request) bool // Transport.Replayable
	OnRetry    func(retry.Event)        // Policy.OnRetry
}

// client is an *http.Client on a retry.Transport with a small real
// backoff (the servers are real, so time is too), whose Base counts the
// attempts of each call by its X-Call-Id header.
type client struct {
	*http.Client
	count *counter
}

// newClient returns a client sending through base, whose idle connections
// are closed when the test ends.
func newClient(t *testing.T, base *http.Transport, o clientOpts) *client {
	t.Helper()
	t.Cleanup(base.CloseIdleConnections)
	cnt := &counter{base: base, outcomes: make(map[string][]string)}
	rt := &retry.Transport{
		Base:       cnt,
		Replayable: o.Replayable,
		Policy: retry.Policy{
			MaxAttempts: maxAttempts,
			Base:        time.Millisecond,
			Cap:         10 * time.Millisecond,
			OnRetry:     o.OnRetry,
		},
	}
	return &client{Client: &http.Client{Transport: rt}, count: cnt}
}

// plainTransport returns a fresh http.Transport, so that no test shares a
// connection pool with another.
func plainTransport() *http.Transport {
	return http.DefaultTransport.(*http.Transport).Clone()
}

// h2Transport returns a fresh http.Transport that trusts pool and speaks
// HTTP/2 to a TLS server that offers it.
func h2Transport(pool *x509.CertPool) *http.Transport {
	tr := plainTransport()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	tr.ForceAttemptHTTP2 = true
	return tr
}

// counter is a RoundTripper that counts the attempts of each call, by its
// X-Call-Id header, and keeps each attempt's outcome. It is safe for
// concurrent use.
type counter struct {
	base     http.RoundTripper
	mu       sync.Mutex          // protects outcomes
	outcomes map[string][]string // per call, each attempt's status or error
}

// RoundTrip sends req through the base and keeps the outcome.
func (c *counter) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(req)
	out := ""
	if err != nil {
		out = err.Error()
	} else {
		out = strconv.Itoa(resp.StatusCode)
	}
	id := req.Header.Get("X-Call-Id")
	c.mu.Lock()
	c.outcomes[id] = append(c.outcomes[id], out)
	c.mu.Unlock()
	return resp, err
}

// attempts returns the outcome of each attempt of the call callID.
func (c *counter) attempts(callID string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.outcomes[callID]...)
}

// call describes one request of a test.
type call struct {
	Method string
	ID     string // sent as X-Call-Id, to find the call's attempts and upstream requests
	Body   []byte // sent through a bytes.Reader, so GetBody rewinds it
	Key    string // sent as Idempotency-Key when not empty
	Expect bool   // sends Expect: 100-continue, so the body waits for the server's word
}

// request builds c's request to url.
func (c call) request(t *testing.T, ctx context.Context, url string) *http.Request {
	t.Helper()
	var body io.Reader
	if c.Body != nil {
		body = bytes.NewReader(c.Body)
	}
	req, err := http.NewRequestWithContext(ctx, c.Method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Call-Id", c.ID)
	if c.Key != "" {
		req.Header.Set("Idempotency-Key", c.Key)
	}
	if c.Expect {
		req.Header.Set("Expect", "100-continue")
	}
	return req
}

// result is what the caller got from one call.
type result struct {
	Status int   // the response's status; 0 with an error
	Err    error // the error; nil with a response
}

func (r result) String() string {
	if r.Err != nil {
		return "error: " + r.Err.Error()
	}
	return "status " + strconv.Itoa(r.Status)
}

// send makes the call, reads the response body whole and closes it.
func (cl *client) send(req *http.Request) result {
	resp, err := cl.Do(req)
	if err != nil {
		return result{Err: err}
	}
	_, err = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return result{Status: resp.StatusCode, Err: err}
	}
	return result{Status: resp.StatusCode}
}

// payload returns n bytes that differ from call to call with seed.
func payload(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) + seed
	}
	return b
}

// tlsFiles is a self-signed certificate for 127.0.0.1, written to a
// test's directory in the shapes nginx and haproxy read.
type tlsFiles struct {
	Cert string // the certificate, PEM
	Key  string // its private key, PEM
	Both string // certificate then key in one file, as haproxy's crt takes
	Pool *x509.CertPool
}

// selfSigned makes a fresh certificate for 127.0.0.1 and writes it to dir.
func selfSigned(t *testing.T, dir string) tlsFiles {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	f := tlsFiles{
		Cert: filepath.Join(dir, "cert.pem"),
		Key:  filepath.Join(dir, "key.pem"),
		Both: filepath.Join(dir, "both.pem"),
		Pool: x509.NewCertPool(),
	}
	f.Pool.AddCert(cert)
	for path, b := range map[string][]byte{f.Cert: certPEM, f.Key: keyPEM, f.Both: append(certPEM, keyPEM...)} {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return f
}
