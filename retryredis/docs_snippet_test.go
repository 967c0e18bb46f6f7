package retryredis_test

import (
	"log"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/pace"
	"github.com/retrykit/retry/retryredis"
)

// TestFleetDocWiring holds the wiring snippet of docs/fleet.md, so that it
// compiles; it builds the client without sending anything.
func TestFleetDocWiring(t *testing.T) {
	var fallbacks atomic.Int64
	rdb := redis.NewClient(&redis.Options{
		Addr:                  "redis:6379",
		ContextTimeoutEnabled: true, // let the Budget's StoreTimeout reach the socket
		MaxRetries:            -1,   // the Budget falls back on its own: fail fast instead
		DialerRetries:         1,
	})
	budget := &retry.Budget{
		Ratio:        0.1,
		MinPerSecond: 10, // for the whole fleet, not each process
		Store:        retryredis.NewBudgetStore(rdb, "openai-prod"),
		OnFallback: func(err error) {
			fallbacks.Add(1) // a metric: the store failed, this process runs on its own window
			log.Printf("retry budget: %v", err)
		},
	}
	client := &http.Client{Transport: &retry.Transport{Policy: retry.Policy{Budget: budget}}}
	defer rdb.Close()
	if client.Transport.(*retry.Transport).Policy.Budget.Store == nil {
		t.Error("the snippet's Budget has no store")
	}
}

// TestFleetDocPacerWiring holds the Pacer's wiring snippet of
// docs/fleet.md, so that it compiles; it builds the client without sending
// anything.
func TestFleetDocPacerWiring(t *testing.T) {
	var fallbacks atomic.Int64
	rdb := redis.NewClient(&redis.Options{
		Addr:                  "redis:6379",
		ContextTimeoutEnabled: true, // let the Pacer's StoreTimeout reach the socket
		MaxRetries:            -1,   // the Pacer falls back on its own: fail fast instead
		DialerRetries:         1,
	})
	pacer := &pace.Pacer{
		Store: retryredis.NewPacerStore(rdb, "openai-prod"), // one name for the fleet's API key
		OnFallback: func(err error) {
			fallbacks.Add(1) // a metric: this process paces from its own buckets for a second
			log.Printf("retry pacer: %v", err)
		},
	}
	client := &http.Client{Transport: &retry.Transport{Pacer: pacer}}
	defer rdb.Close()
	if client.Transport.(*retry.Transport).Pacer.(*pace.Pacer).Store == nil {
		t.Error("the snippet's Pacer has no store")
	}
}

// TestFleetDocClusterWiring holds the Cluster snippet of docs/fleet.md, so
// that it compiles; it builds the stores without sending anything.
func TestFleetDocClusterWiring(t *testing.T) {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                 []string{"redis-0:6379", "redis-1:6379", "redis-2:6379"},
		ContextTimeoutEnabled: true, // the stores' StoreTimeout reaches the socket
	})
	budgetStore := retryredis.NewBudgetStore(rdb, "openai-prod") // each key in one slot: {openai-prod}
	pacerStore := retryredis.NewPacerStore(rdb, "openai-prod")
	defer rdb.Close()
	if budgetStore.Client == nil || pacerStore.Client == nil {
		t.Error("the snippet's stores have no client")
	}
}
