// Package retryredis shares the state of a [retry.Budget] among many
// processes through Redis, so that a fleet of workers that call one service
// retries, all together, as much as one Budget allows.
//
// Give every process a Budget whose Store is a [BudgetStore] with the same
// Name on the same Redis:
//
//	rdb := redis.NewClient(&redis.Options{
//		Addr:                  "redis:6379",
//		ContextTimeoutEnabled: true, // the Budget's StoreTimeout reaches the socket
//		MaxRetries:            -1,   // the Budget falls back on its own
//	})
//	budget := &retry.Budget{Store: retryredis.NewBudgetStore(rdb, "openai")}
//	p := retry.Policy{Budget: budget}
//
// A Budget settles with Redis in the background and in leases, so calls do
// not wait on Redis; when Redis is slow or down, each process falls back to
// its own in-process Budget until Redis answers again. Each settlement is
// one script call, timed by the Redis server's clock, so the processes'
// clocks need not agree.
//
// A [PacerStore] does the same for a [pace.Pacer]: every process whose
// Pacer has a PacerStore with the same Name on the same Redis reserves
// from one bucket per API key and dimension, and honours the Retry-After
// any of them received. docs/fleet.md in the repository is the guide.
package retryredis
