package interop_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-github/v84/github"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/retrykit/retry"
	"github.com/stripe/stripe-go/v82"
)

// The Stripe, AWS and GitHub snippets of docs/sdks.md. Each builds its
// client as the guide says, aimed at the real service; the test then points
// the client's retry.Transport at a local server (redirect) and makes one
// call, so that the snippet runs end to end without the network.

// redirect sends every request to the server at to, whatever its URL says.
type redirect struct {
	base http.RoundTripper
	to   *url.URL
}

func (r redirect) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context()) // a RoundTripper must not modify its request
	req.URL.Scheme, req.URL.Host, req.Host = r.to.Scheme, r.to.Host, ""
	return r.base.RoundTrip(req)
}

// redirectTo returns a redirect to srv, through srv's own client transport,
// whose connections srv.Close closes.
func redirectTo(t *testing.T, srv *httptest.Server) redirect {
	t.Helper()
	to, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return redirect{base: srv.Client().Transport, to: to}
}

// jsonServer answers every request with body as JSON and records the
// Authorization header of the last one.
func jsonServer(t *testing.T, body string, auth *string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*auth = r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestDocStripe(t *testing.T) {
	var auth string
	srv := jsonServer(t, `{"id":"cus_123","object":"customer"}`, &auth)
	key := "sk_test_123"

	httpClient := &http.Client{Transport: &retry.Transport{}}
	sc := stripe.NewClient(key, stripe.WithBackends(stripe.NewBackendsWithConfig(&stripe.BackendConfig{
		HTTPClient:        httpClient,
		MaxNetworkRetries: stripe.Int64(0),
	})))

	httpClient.Transport.(*retry.Transport).Base = redirectTo(t, srv)
	c, err := sc.V1Customers.Retrieve(t.Context(), "cus_123", nil)
	if err != nil {
		t.Fatal(err)
	}
	got := []string{c.ID, auth}
	if diff := cmp.Diff([]string{"cus_123", "Bearer " + key}, got); diff != "" {
		t.Errorf("[customer, Authorization] (-want +got):\n%s", diff)
	}
}

// TestDocS3 names its *testing.T tt, since the snippet's Transport is t.
// config.LoadDefaultConfig reads the environment: the test gives it a
// region and keys there, and no shared config files.
func TestDocS3(tt *testing.T) {
	backend := s3mem.New()
	if err := backend.CreateBucket("docs"); err != nil {
		tt.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog())).Server())
	defer srv.Close()
	none := filepath.Join(tt.TempDir(), "none")
	for k, v := range map[string]string{
		"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret",
		"AWS_CONFIG_FILE": none, "AWS_SHARED_CREDENTIALS_FILE": none, "AWS_PROFILE": "",
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_RETRY_MODE": "", "AWS_MAX_ATTEMPTS": "",
		"AWS_CA_BUNDLE": "", // with a bundle, LoadDefaultConfig refuses an *http.Client
	} {
		tt.Setenv(k, v)
	}
	ctx := tt.Context()
	var buckets []string
	var maxAttempts int
	run := func() error {
		t := &retry.Transport{ReplayBuffer: 16 << 20} // uploads up to 16 MiB can be sent again
		httpClient := &http.Client{Transport: t}

		cfg, err := config.LoadDefaultConfig(ctx,
			config.WithHTTPClient(httpClient),
			config.WithRetryer(func() aws.Retryer { return aws.NopRetryer{} }),
		)
		if err != nil {
			return err
		}
		s3c := s3.NewFromConfig(cfg)
		// Or per client: s3.NewFromConfig(cfg, func(o *s3.Options) { o.Retryer = aws.NopRetryer{} })

		t.Base = redirectTo(tt, srv)
		maxAttempts = cfg.Retryer().MaxAttempts()
		out, err := s3c.ListBuckets(ctx, &s3.ListBucketsInput{})
		if err != nil {
			return err
		}
		for _, b := range out.Buckets {
			buckets = append(buckets, aws.ToString(b.Name))
		}
		return nil
	}
	if err := run(); err != nil {
		tt.Fatal(err)
	}
	if diff := cmp.Diff([]string{"docs"}, buckets); diff != "" {
		tt.Errorf("buckets (-want +got):\n%s", diff)
	}
	if maxAttempts != 1 {
		tt.Errorf("the SDK's retryer makes %d attempts, want 1", maxAttempts)
	}
}

// TestDocGitHub names its *testing.T tt, since the snippet's Transport is t.
func TestDocGitHub(tt *testing.T) {
	var auth string
	repo, err := json.Marshal(map[string]any{"name": "retry", "full_name": "retrykit/retry"})
	if err != nil {
		tt.Fatal(err)
	}
	srv := jsonServer(tt, string(repo), &auth)
	token := "ghp_test"

	t := &retry.Transport{Policy: retry.Policy{Deadline: 2 * time.Minute}}
	t.Replayable = func(req *http.Request) bool {
		// PUT /repos/{owner}/{repo}/contents/{path} creates a commit: not idempotent in practice.
		if req.Method == http.MethodPut && strings.HasPrefix(req.URL.Path, "/repos/") &&
			strings.Contains(req.URL.Path, "/contents/") {
			return false
		}
		return retry.Idempotent(req)
	}
	gh := github.NewClient(&http.Client{Transport: t}).WithAuthToken(token)

	t.Base = redirectTo(tt, srv)
	r, _, err := gh.Repositories.Get(tt.Context(), "retrykit", "retry")
	if err != nil {
		tt.Fatal(err)
	}
	if diff := cmp.Diff([]string{"retrykit/retry", "Bearer " + token}, []string{r.GetFullName(), auth}); diff != "" {
		tt.Errorf("[repository, Authorization] (-want +got):\n%s", diff)
	}

	tests := []struct {
		name, method, path string
		want               bool
	}{
		{name: "a file's contents", method: http.MethodPut, path: "/repos/o/r/contents/README.md", want: false},
		{name: "topics", method: http.MethodPut, path: "/repos/o/r/topics", want: true},
		{name: "a read", method: http.MethodGet, path: "/repos/o/r/contents/README.md", want: true},
	}
	for _, tc := range tests {
		req := httptest.NewRequest(tc.method, "https://api.github.com"+tc.path, nil)
		if got := t.Replayable(req); got != tc.want {
			tt.Errorf("%s: Replayable(%s %s) = %t, want %t", tc.name, tc.method, tc.path, got, tc.want)
		}
	}
}
