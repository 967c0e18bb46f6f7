package interop_test

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"testing"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retrytest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	code := m.Run()
	stopStripeMock()
	if code == 0 {
		// Every client's idle connections are closed at the end of its
		// test; what remains is a leak.
		if err := goleak.Find(); err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

// retrier is a retry.Transport on fake time, with the attempts it made
// counted through OnRetry.
type retrier struct {
	*retry.Transport
	ft     *retrytest.FakeTime
	events chan retry.Event // every OnRetry, buffered
}

// newRetrier returns a Transport whose Policy sleeps on fake time (Rand 1:
// every backoff sits on its bound). Its Base is set by setBase.
func newRetrier() *retrier {
	ft := retrytest.NewFakeTime()
	r := &retrier{ft: ft, events: make(chan retry.Event, 64)}
	r.Transport = &retry.Transport{
		Policy: retry.Policy{
			Clock: ft.Clock, Sleep: ft.Sleep, Rand: ft.Rand,
			OnRetry: func(e retry.Event) { r.events <- e },
		},
	}
	return r
}

// setBase makes the Transport send through base, and closes base's idle
// connections when the test ends.
func (r *retrier) setBase(t *testing.T, base *http.Transport) {
	r.Base = base
	t.Cleanup(base.CloseIdleConnections)
}

// retries returns the number of retries OnRetry reported so far.
func (r *retrier) retries() int { return len(r.events) }

// retryErrs returns the errors of the retries OnRetry reported since the
// last call.
func (r *retrier) retryErrs() []string {
	var errs []string
	for {
		select {
		case e := <-r.events:
			errs = append(errs, e.Err.Error())
		default:
			return errs
		}
	}
}

// client returns an *http.Client on the Transport.
func (r *retrier) client() *http.Client { return &http.Client{Transport: r.Transport} }

// plainTransport returns a fresh http.Transport, so that no test shares a
// connection pool with another. It has ForceAttemptHTTP2, so it speaks
// HTTP/2 to a TLS server that offers it.
func plainTransport() *http.Transport {
	return http.DefaultTransport.(*http.Transport).Clone()
}

// transportFor returns a fresh http.Transport for reaching p, trusting its
// certificate when it serves TLS.
func transportFor(p *faultProxy) *http.Transport {
	base := plainTransport()
	if p.TLS != nil {
		pool := x509.NewCertPool()
		pool.AddCert(p.Certificate())
		base.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return base
}

// proto is how a client reaches its server.
type proto string

const (
	overHTTP  proto = "http"  // plain HTTP/1.1
	overHTTPS proto = "https" // HTTP/1.1 over TLS
	overH2    proto = "h2"    // HTTP/2 over TLS
)

// opts returns the faultProxy options that serve pr.
func (pr proto) opts() proxyOpts {
	return proxyOpts{TLS: pr == overHTTPS, HTTP2: pr == overH2}
}

// wire is the request protocol a server sees from a client using pr.
func (pr proto) wire() string {
	if pr == overH2 {
		return "HTTP/2.0"
	}
	return "HTTP/1.1"
}
