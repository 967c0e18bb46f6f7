package retry_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/retrykit/retry"
)

// The snippet of docs/hedging.md: a client that hedges slow reads, within
// a Budget.
func ExampleHedge() {
	delay := &retry.HedgeDelay{} // learns the 95th percentile of recent answers, per host; share it
	client := &http.Client{Transport: &retry.Transport{Policy: retry.Policy{
		Hedge:  retry.Hedge{Max: 1, Delay: 50 * time.Millisecond, Adaptive: delay},
		Budget: &retry.Budget{}, // hedges and retries together add at most a tenth to the load
	}}}

	// A server whose first answer straggles for a second, as one slow
	// replica would; the hedge, sent after 50 ms, answers at once.
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			select {
			case <-time.After(time.Second):
			case <-r.Context().Done(): // the hedge won: this attempt is cancelled
				return
			}
		}
		fmt.Fprintf(w, "object from request %d", n.Load())
	}))
	defer srv.Close()

	start := time.Now()
	resp, err := client.Get(srv.URL + "/objects/1")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(string(body))
	fmt.Println("well under the straggler's second:", time.Since(start) < 500*time.Millisecond)
	// Output:
	// object from request 2
	// well under the straggler's second: true
}
