package retryredis_test

import (
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/retryredis"
)

// Every process gives its Budget a store with the same name on the same
// Redis; the floor of retries is then the fleet's. Here two Budgets stand
// for two processes, and miniredis for the Redis they share.
func ExampleBudgetStore() {
	srv, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	defer rdb.Close()

	process := func() *retry.Budget {
		return &retry.Budget{
			MinPerSecond: 0.5,              // 5 retries per window for the whole fleet
			Window:       10 * time.Second, // whatever the traffic
			Store:        retryredis.NewBudgetStore(rdb, "payments-api"),
			StoreTimeout: time.Second, // generous for an example; the default is 50 ms
		}
	}
	a, b := process(), process()
	granted := map[string]int{}
	for range 10 {
		if a.Withdraw() {
			granted["a"]++
		}
		if b.Withdraw() {
			granted["b"]++
		}
	}
	fmt.Println("retries granted to the fleet:", granted["a"]+granted["b"])
	fmt.Println("key:", retryredis.NewBudgetStore(rdb, "payments-api").Key())
	// Output:
	// retries granted to the fleet: 5
	// key: retry:budget:{payments-api}
}
