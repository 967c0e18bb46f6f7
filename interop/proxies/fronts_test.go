package proxies_test

import (
	"net/http"
	"testing"
	"time"
)

// front is one kind of proxy, started without retries of its own in front
// of one upstream.
type front struct {
	name string
	// refused is its answer when the upstream refuses connections.
	refused int
	// start runs it in front of upstream, with a timeout for the
	// upstream's answer (zero: 10s), and returns its URL.
	start func(t *testing.T, upstream string, timeout time.Duration) string
}

// fronts are nginx (proxy_next_upstream off) and haproxy (retries 0, no
// retry-on).
func fronts() []front {
	return []front{
		{
			name:    "nginx",
			refused: http.StatusBadGateway,
			start: func(t *testing.T, upstream string, timeout time.Duration) string {
				o := nginxOpts{Upstreams: []string{upstream}}
				if timeout > 0 {
					o.Location = "proxy_read_timeout " + timeout.String() + ";"
				}
				return startNginx(t, o).url
			},
		},
		{
			name:    "haproxy",
			refused: http.StatusServiceUnavailable,
			start: func(t *testing.T, upstream string, timeout time.Duration) string {
				o := haproxyOpts{Servers: []string{upstream}}
				if timeout > 0 {
					o.Backend = "timeout server " + timeout.String()
				}
				return startHAProxy(t, o).url
			},
		},
	}
}
