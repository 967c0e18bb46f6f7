package retry_test

import (
	"fmt"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/retrykit/retry"
)

// A Budget shared by every call to a service lets retries add a tenth to
// its traffic, and a floor of retries for quiet moments; past that, retries
// are refused until the window moves on.
func ExampleBudget() {
	clock := clockwork.NewFakeClock()
	b := &retry.Budget{
		Ratio:        0.1,              // one retry per ten calls
		MinPerSecond: 0.2,              // and two per 10 s whatever the traffic
		Window:       10 * time.Second, // remembered for 10 s
		Clock:        clock,
	}
	retries := func() (allowed int) {
		for b.Withdraw() {
			allowed++
		}
		return allowed
	}

	for range 30 { // thirty calls, each deposits on its first attempt
		b.Deposit()
	}
	fmt.Println("retries allowed after 30 calls:", retries())
	fmt.Println("one more retry:", b.Withdraw())

	clock.Advance(10 * time.Second) // the calls and retries are forgotten
	fmt.Println("retries allowed 10 s later, with no calls:", retries())
	// Output:
	// retries allowed after 30 calls: 5
	// one more retry: false
	// retries allowed 10 s later, with no calls: 2
}
