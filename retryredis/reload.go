package retryredis

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// reloadEvery is how often, at most, a store whose calls fail asks a
// cluster client to read the cluster's slot map again.
const reloadEvery = time.Second

// stateReloader is the method by which a *redis.ClusterClient reads the
// cluster's slot map again.
type stateReloader interface{ ReloadState(ctx context.Context) }

// reloader asks a cluster client to read the slot map again after a failed
// store call, once a second at most. go-redis reads it again by itself only
// on a MOVED, ASK or READONLY reply, or once it is older than
// ClusterStateReloadInterval (a minute by default): after a master dies and
// its replica takes over, no reply comes from the dead address to say so,
// and every call would fail, refused, for up to that minute. The zero
// reloader is ready to use.
type reloader struct {
	last atomic.Int64 // when it last asked, in Unix nanoseconds
}

// failed takes a store call's error on client. Any error counts but the
// caller's cancel: a refused connection, a timeout, a CLUSTERDOWN reply.
func (r *reloader) failed(client redis.Scripter, err error) {
	c, ok := client.(stateReloader)
	if !ok || err == nil || errors.Is(err, context.Canceled) {
		return
	}
	now := time.Now().UnixNano()
	last := r.last.Load()
	if now-last < int64(reloadEvery) || !r.last.CompareAndSwap(last, now) {
		return
	}
	c.ReloadState(context.Background()) // in a goroutine of go-redis's
}
