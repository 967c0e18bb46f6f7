package retryredis_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/pace"
	"github.com/retrykit/retry/retryredis"
)

// Every process gives its Pacer a store with the same name on the same
// Redis; the processes then queue in one bucket per API key, whichever of
// them read the server's headers. Here two Transports stand for two
// processes, and miniredis, its clock stopped, for the Redis they share.
func ExamplePacerStore() {
	srv, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	srv.SetTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	defer rdb.Close()

	// An API whose bucket is empty: it refills at one request a second.
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("x-ratelimit-limit-requests", "60")
		w.Header().Set("x-ratelimit-remaining-requests", "0")
		w.Header().Set("x-ratelimit-reset-requests", "1m0s")
	}))
	defer api.Close()

	process := func(name string) *http.Client {
		pacer := &pace.Pacer{
			Store:        retryredis.NewPacerStore(rdb, "openai-prod"),
			StoreTimeout: time.Second, // generous for an example; the default is 50 ms
			OnWait: func(e pace.Event) {
				fmt.Printf("process %s waits %v\n", name, e.Delay)
			},
		}
		// The example does not really wait: its Sleep returns at once.
		noSleep := func(context.Context, time.Duration) error { return nil }
		return &http.Client{Transport: &retry.Transport{Pacer: pacer, Policy: retry.Policy{Sleep: noSleep}}}
	}
	a, b := process("a"), process("b")
	for _, c := range []*http.Client{a, b, a, b} {
		resp, err := c.Get(api.URL)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
	}
	// Output:
	// process b waits 1s
	// process a waits 2s
	// process b waits 3s
}

// Each key of the Pacer, an API host with a digest of the credential or
// what Pacer.Key returns, is one hash in Redis, in one slot of a cluster.
// A key unfit for Redis is replaced by its digest.
func ExamplePacerStore_Key() {
	store := retryredis.NewPacerStore(nil, "openai-prod")
	fmt.Println(store.Key("api.openai.com#3f2a0c9d1b7e"))
	fmt.Println(len(store.Key("a key\nwith {braces} and a newline")))
	// Output:
	// retry:pacer:{openai-prod:api.openai.com#3f2a0c9d1b7e}
	// 91
}
