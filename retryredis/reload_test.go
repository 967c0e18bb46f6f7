package retryredis

import (
	"context"
	"fmt"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"
)

// reloadCounter is a cluster client that counts the times it is asked to
// read the slot map again.
type reloadCounter struct {
	redis.Scripter // nil: only ReloadState is called
	n              int
}

func (c *reloadCounter) ReloadState(context.Context) { c.n++ }

func TestReloaderAsksAClusterClientOnceASecond(t *testing.T) {
	t.Parallel()
	refused := fmt.Errorf("dial tcp 127.0.0.1:7001: %w", syscall.ECONNREFUSED)
	tests := []struct {
		name string
		errs []error
		want int
	}{
		{name: "a refused connection", errs: []error{refused}, want: 1},
		{name: "failures in a burst", errs: []error{refused, refused, context.DeadlineExceeded, refused}, want: 1},
		{name: "the caller's cancel", errs: []error{fmt.Errorf("x: %w", context.Canceled)}, want: 0},
		{name: "no error", errs: []error{nil}, want: 0},
	}
	for _, tc := range tests {
		c := &reloadCounter{}
		var r reloader
		for _, err := range tc.errs {
			r.failed(c, err)
		}
		if c.n != tc.want {
			t.Errorf("%s: ReloadState called %d times, want %d", tc.name, c.n, tc.want)
		}
	}
}
