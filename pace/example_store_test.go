package pace_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/pace"
)

// downStore is a Store whose server cannot be reached.
type downStore struct{}

func (downStore) Reserve(context.Context, string, float64, time.Duration) (pace.Grant, error) {
	return pace.Grant{}, errors.New("dial tcp 10.0.0.7:6379: connection refused")
}

func (downStore) Learn(context.Context, string, pace.Report) error {
	return errors.New("dial tcp 10.0.0.7:6379: connection refused")
}

// A Pacer whose shared store is down paces from what this process learned,
// and says so through OnFallback: no call fails because the store did. The
// retryredis module has a Store on Redis.
func ExampleStore() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()

	pacer := &pace.Pacer{
		Store:      downStore{},
		OnFallback: func(err error) { fmt.Println("fallback:", err) },
	}
	client := &http.Client{Transport: &retry.Transport{Pacer: pacer}}
	for range 2 {
		resp, err := client.Get(srv.URL)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		fmt.Println(resp.Status)
	}
	// Output:
	// fallback: retry: Pacer.Store.Reserve failed: dial tcp 10.0.0.7:6379: connection refused
	// 200 OK
	// 200 OK
}
