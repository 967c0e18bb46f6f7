package retryotel_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryotel"
)

// The snippets of docs/observability.md. They report to the global
// providers (a zero Config), which are no-ops here: these tests check that
// the snippets build working clients; the telemetry itself is tested
// elsewhere in this package.

// okServer answers "ok" to every request.
func okServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(srv.Close)
	return srv
}

// get fetches url through rt and returns the body.
func get(t *testing.T, rt http.RoundTripper, url string) string {
	t.Helper()
	client := &http.Client{Transport: rt}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestDocRecipeHTTP(t *testing.T) {
	srv := okServer(t)

	p := retry.Policy{MaxAttempts: 4, Deadline: 30 * time.Second}
	client := &http.Client{Transport: retryotel.NewTransport(nil, p, retryotel.Config{})}

	if got := get(t, client.Transport, srv.URL); got != "ok" {
		t.Errorf("body = %q, want ok", got)
	}
}

// TestDocRecipeLayers names its *testing.T tt, since the snippet's
// Transport is t.
func TestDocRecipeLayers(tt *testing.T) {
	srv := okServer(tt)
	base := http.DefaultTransport.(*http.Transport).Clone()
	tt.Cleanup(base.CloseIdleConnections)
	p := retry.Policy{MaxAttempts: 4, Deadline: 30 * time.Second}

	t := retry.NewTransport(
		otelhttp.NewTransport(retryotel.ResendCount(base)), // one span per attempt
		retryotel.Instrument(p, retryotel.Config{}),        // events and metrics per call
	)

	if got := get(tt, t, srv.URL); got != "ok" {
		tt.Errorf("body = %q, want ok", got)
	}
}

// askModel stands for the call that retry.Do makes: it reports which
// attempt it ran in, as a span of its own would.
func askModel(ctx context.Context) (string, error) {
	n, ok := retry.AttemptFromContext(ctx)
	return fmt.Sprintf("attempt %d (%t)", n, ok), nil
}

func TestDocRecipeDo(t *testing.T) {
	ctx := t.Context()

	p := retryotel.Instrument(retry.Policy{}, retryotel.Config{})
	answer, err := retry.Do(ctx, p, func(ctx context.Context) (string, error) { return askModel(ctx) })

	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("attempt 1 (true)", answer); diff != "" {
		t.Errorf("answer (-want +got):\n%s", diff)
	}
}
