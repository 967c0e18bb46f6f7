package snippets_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/retrykit/retry"
)

// The README's snippets. Examples without an Output comment are compiled
// and not run: these would call the network.

func Example_readmeTransport() {
	client := &http.Client{
		Transport: &retry.Transport{}, // http.DefaultTransport underneath, the default Policy
	}
	resp, err := client.Get("https://api.example.com/v1/models")

	var rerr *retry.Error
	if errors.As(err, &rerr) {
		log.Printf("gave up after %d attempts (%s): %v", rerr.Attempts, rerr.Reason, rerr.Err)
	}
	if err == nil {
		resp.Body.Close()
	}
}

func Example_readmeSDK() {
	client := openai.NewClient(
		option.WithHTTPClient(&http.Client{Transport: &retry.Transport{}}),
		option.WithMaxRetries(0), // the Transport retries; the SDK must not
	)
	_ = client
}

func Example_readmeDo() {
	ctx, prompt := context.Background(), "Say hello."

	answer, err := retry.Do(ctx, retry.Policy{MaxAttempts: 4, Deadline: 30 * time.Second},
		func(ctx context.Context) (string, error) {
			return complete(ctx, prompt) // honour ctx: it ends when the attempt's time is up
		})

	fmt.Println(answer, err)
	// Output: Hello! <nil>
}

// complete stands for a call to a remote service.
func complete(ctx context.Context, prompt string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	return "Hello!", nil
}
