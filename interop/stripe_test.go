package interop_test

import (
	"bytes"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stripe/stripe-go/v82"
)

// newStripeClient returns a stripe-go client that sends through r to
// proxy, with the SDK's own retries off.
func newStripeClient(r *retrier, proxy *faultProxy) *stripe.Client {
	backends := stripe.NewBackendsWithConfig(&stripe.BackendConfig{
		HTTPClient:        r.client(),
		URL:               stripe.String(proxy.URL),
		MaxNetworkRetries: stripe.Int64(0),
		LeveledLogger:     &stripe.LeveledLogger{Level: stripe.LevelNull},
	})
	return stripe.NewClient("sk_test_123", stripe.WithBackends(backends))
}

// newStripeEnv starts a faultProxy speaking pr in front of stripe-mock,
// scripting customer creates, and a stripe-go client that reaches it
// through a retry.Transport.
func newStripeEnv(t *testing.T, pr proto, script ...fault) (*faultProxy, *retrier, *stripe.Client) {
	t.Helper()
	opts := pr.opts()
	opts.Match = isCustomerCreate
	proxy := newFaultProxy(t, stripeMockProxy(t), opts, script...)
	r := newRetrier()
	r.setBase(t, transportFor(proxy))
	return proxy, r, newStripeClient(r, proxy)
}

// isCustomerCreate matches what the stripe tests script: creates.
func isCustomerCreate(r *http.Request) bool {
	return r.Method == http.MethodPost && r.URL.Path == "/v1/customers"
}

func TestStripeCreateSurvives(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		script     []fault
		wantSleeps []time.Duration
		wantFaults []string
	}{{
		name:       "503",
		script:     []fault{status(503, `{"error":{"type":"api_error"}}`)},
		wantSleeps: []time.Duration{500 * time.Millisecond},
		wantFaults: []string{"status 503", "forward"},
	}, {
		// A keyed create may be sent again after a failure the server
		// may have processed: the key makes the second send harmless.
		name:       "keyed 500",
		script:     []fault{status(500, `{"error":{"type":"api_error"}}`)},
		wantSleeps: []time.Duration{500 * time.Millisecond},
		wantFaults: []string{"status 500", "forward"},
	}, {
		name:       "429 with Retry-After",
		script:     []fault{status(429, `{"error":{"type":"rate_limit_error"}}`, "Retry-After", "3")},
		wantSleeps: []time.Duration{3 * time.Second},
		wantFaults: []string{"status 429", "forward"},
	}, {
		name:       "reset before processing",
		script:     []fault{{ResetBefore: true}},
		wantSleeps: []time.Duration{500 * time.Millisecond},
		wantFaults: []string{"reset before", "forward"},
	}, {
		// The server created the customer, but the answer was lost: only
		// the same Idempotency-Key lets Stripe answer the second send with
		// the first one's result.
		name:       "reset after processing",
		script:     []fault{{ResetAfter: true}},
		wantSleeps: []time.Duration{500 * time.Millisecond},
		wantFaults: []string{"reset after", "forward"},
	}, {
		name:       "503 then reset then 429",
		script:     []fault{status(503, ""), {ResetBefore: true}, status(429, "", "Retry-After", "1")},
		wantSleeps: []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second},
		wantFaults: []string{"status 503", "reset before", "status 429", "forward"},
	}, {
		// The server's word overrides the status rule, even on a 4xx.
		name:       "400 with Stripe-Should-Retry: true",
		script:     []fault{status(400, `{"error":{"type":"invalid_request_error"}}`, "Stripe-Should-Retry", "true")},
		wantSleeps: []time.Duration{500 * time.Millisecond},
		wantFaults: []string{"status 400", "forward"},
	}, {
		name:       "409 with Stripe-Should-Retry: true",
		script:     []fault{status(409, `{"error":{"type":"idempotency_error"}}`, "Stripe-Should-Retry", "true")},
		wantSleeps: []time.Duration{500 * time.Millisecond},
		wantFaults: []string{"status 409", "forward"},
	}}
	for _, tt := range tests {
		for _, pr := range []proto{overHTTP, overH2} {
			t.Run(tt.name+"/"+string(pr), func(t *testing.T) {
				t.Parallel()
				proxy, r, sc := newStripeEnv(t, pr, tt.script...)

				c, err := sc.V1Customers.Create(t.Context(), &stripe.CustomerCreateParams{
					Email: stripe.String("jenny@example.com"),
					Name:  stripe.String("Jenny Rosen"),
				})
				if err != nil {
					t.Fatalf("Create: %v", err)
				}
				if c.ID == "" || c.Object != "customer" {
					t.Errorf("Create returned %+v, want a customer", c)
				}
				got := proxy.Received()
				if diff := cmp.Diff(tt.wantFaults, faults(got)); diff != "" {
					t.Errorf("sends (-want +got):\n%s", diff)
				}
				sameKeyAndBody(t, got)
				if diff := cmp.Diff(tt.wantSleeps, r.ft.Sleeps()); diff != "" {
					t.Errorf("sleeps (-want +got):\n%s", diff)
				}
				for i, g := range got {
					if g.Proto != pr.wire() {
						t.Errorf("send %d came over %s, want %s", i+1, g.Proto, pr.wire())
					}
				}
			})
		}
	}
}

func TestStripeShouldRetryFalseStops(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		status int
		header []string
	}{
		{name: "500", status: 500, header: []string{"Stripe-Should-Retry", "false"}},
		{name: "503", status: 503, header: []string{"Stripe-Should-Retry", "false"}},
		{name: "429", status: 429, header: []string{"Stripe-Should-Retry", "false"}},
		// When the two headers disagree, false wins.
		{name: "409 told true and false", status: 409,
			header: []string{"Stripe-Should-Retry", "true", "X-Should-Retry", "false"}},
		{name: "503 told false and true", status: 503,
			header: []string{"Stripe-Should-Retry", "false", "X-Should-Retry", "true"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			proxy, r, sc := newStripeEnv(t, overHTTP,
				status(tt.status, `{"error":{"type":"api_error","message":"replayed"}}`, tt.header...))

			_, err := sc.V1Customers.Create(t.Context(), &stripe.CustomerCreateParams{Email: stripe.String("a@example.com")})
			var se *stripe.Error
			if !errors.As(err, &se) || se.HTTPStatusCode != tt.status {
				t.Fatalf("Create error = %v, want a *stripe.Error with status %d", err, tt.status)
			}
			got := proxy.Received()
			if diff := cmp.Diff([]string{"status " + strconv.Itoa(tt.status)}, faults(got)); diff != "" {
				t.Errorf("sends (-want +got):\n%s", diff)
			}
			if len(got) > 0 && got[0].Header.Get("Idempotency-Key") == "" {
				t.Error("the create carried no Idempotency-Key: the case tests nothing")
			}
			if n := r.retries(); n != 0 {
				t.Errorf("OnRetry called %d times, want 0", n)
			}
		})
	}
}

// TestStripeConflictWithoutHeaderIsFinal pins the status rule: a 409
// without Stripe-Should-Retry is a 4xx like any other, handed back at
// once. (stripe-go's own retrier would retry it.)
func TestStripeConflictWithoutHeaderIsFinal(t *testing.T) {
	t.Parallel()
	proxy, _, sc := newStripeEnv(t, overHTTP, status(409, `{"error":{"type":"idempotency_error"}}`))
	_, err := sc.V1Customers.Create(t.Context(), &stripe.CustomerCreateParams{Email: stripe.String("a@example.com")})
	var se *stripe.Error
	if !errors.As(err, &se) || se.HTTPStatusCode != 409 {
		t.Fatalf("Create error = %v, want a *stripe.Error with status 409", err)
	}
	if n := len(proxy.Received()); n != 1 {
		t.Errorf("server saw %d sends, want 1", n)
	}
}

// faults lists what the proxy did with each send.
func faults(got []received) []string {
	var s []string
	for _, g := range got {
		s = append(s, g.Fault)
	}
	return s
}

// sameKeyAndBody checks that every send carried the first one's
// Idempotency-Key (not empty) and body, whole.
func sameKeyAndBody(t *testing.T, got []received) {
	t.Helper()
	if len(got) == 0 {
		t.Fatal("the server saw no send")
	}
	key := got[0].Header.Get("Idempotency-Key")
	if key == "" {
		t.Error("the first send carried no Idempotency-Key")
	}
	for i, g := range got {
		if k := g.Header.Get("Idempotency-Key"); k != key {
			t.Errorf("send %d: Idempotency-Key %q, want %q", i+1, k, key)
		}
		if !g.Complete || !bytes.Equal(g.Body, got[0].Body) {
			t.Errorf("send %d: body %q (complete %v), want %q", i+1, g.Body, g.Complete, got[0].Body)
		}
	}
}
