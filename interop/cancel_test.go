package interop_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// cancelDuringSleep makes r's Policy cancel the call's context as its first
// backoff begins, as a caller that gives up would.
func cancelDuringSleep(r *retrier, cancel context.CancelFunc) {
	r.Policy.Sleep = func(ctx context.Context, d time.Duration) error {
		cancel()
		return r.ft.Sleep(ctx, d)
	}
}

// TestCallerCancelDuringBackoff: a caller that cancels while the
// Transport waits to retry gets context.Canceled back through the SDK at
// once, and nothing more is sent.
func TestCallerCancelDuringBackoff(t *testing.T) {
	t.Parallel()
	t.Run("go-github", func(t *testing.T) {
		t.Parallel()
		e := newGitHubEnv(t, overHTTP, nil, func(time.Time) []fault { return []fault{status(503, "")} })
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		cancelDuringSleep(e.r, cancel)
		_, _, err := e.client.Repositories.Get(ctx, "octo", "hello")
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Get error = %v, want one matching context.Canceled", err)
		}
		if n := len(e.proxy.Received()); n != 1 {
			t.Errorf("server saw %d sends, want 1", n)
		}
	})
	t.Run("s3", func(t *testing.T) {
		t.Parallel()
		e := newS3Env(t, overHTTP, func(*http.Request) bool { return true }, status(503, ""))
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		cancelDuringSleep(e.r, cancel)
		_, err := e.client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(s3Bucket)})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("ListObjectsV2 error = %v, want one matching context.Canceled", err)
		}
		if n := len(e.proxy.Received()); n != 1 {
			t.Errorf("server saw %d sends, want 1", n)
		}
	})
}
