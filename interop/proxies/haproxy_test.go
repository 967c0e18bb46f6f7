package proxies_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// haproxyOpts configure an haproxy in front of one or more upstreams.
type haproxyOpts struct {
	// Servers are the host:port of the backend's servers, in order.
	Servers []string
	// Global, Frontend and Backend are lines added to those sections. A
	// setting of the defaults section (retries 0, timeout server 10s)
	// given again in Backend overrides it.
	Global, Frontend, Backend string
	// TLS, when set, makes the frontend bind with ssl, offering h2 and
	// http/1.1.
	TLS *tlsFiles
	// MasterWorker runs haproxy in master-worker mode (-W), so that
	// reload (SIGUSR2 to the master) starts a new worker and stops the
	// old one softly.
	MasterWorker bool
}

// haproxy is a running haproxy, as the test's child.
type haproxy struct {
	*process
	url string // http:// or https://127.0.0.1:port
}

// startHAProxy runs haproxy in the foreground (-db) as the test's child on a
// free loopback port, logging each request to its output, and stops it
// when the test ends.
func startHAProxy(t *testing.T, o haproxyOpts) *haproxy {
	t.Helper()
	bin := binary(t, "haproxy")
	dir := t.TempDir()
	conf := filepath.Join(dir, "haproxy.cfg")
	p, ports := launch(t, 1, func(ports []int) (*process, []string) {
		if err := os.WriteFile(conf, []byte(haproxyConf(ports[0], o)), 0o600); err != nil {
			t.Fatal(err)
		}
		args := []string{"-db", "-f", conf}
		if o.MasterWorker {
			args = append([]string{"-W"}, args...)
		}
		return start(t, dir, bin, args...), []string{fmt.Sprintf("127.0.0.1:%d", ports[0])}
	})
	scheme := "http"
	if o.TLS != nil {
		scheme = "https"
	}
	h := &haproxy{process: p, url: fmt.Sprintf("%s://127.0.0.1:%d/", scheme, ports[0])}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("haproxy output:\n%s", h.output())
		}
	})
	return h
}

// haproxyConf writes the config: one thread, no retries of its own (so
// that what reaches the upstream is the Transport's doing), and an
// httplog line per request on stdout.
func haproxyConf(port int, o haproxyOpts) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("global")
	p("  nbthread 1")
	p("  log stdout format raw local0 info")
	p("  %s", o.Global)
	p("defaults")
	p("  mode http")
	p("  log global")
	p("  option httplog")
	p("  timeout connect 1s")
	p("  timeout client 10s")
	p("  timeout server 10s")
	p("  retries 0")
	p("frontend fe")
	if o.TLS != nil {
		p("  bind 127.0.0.1:%d ssl crt %s alpn h2,http/1.1", port, o.TLS.Both)
	} else {
		p("  bind 127.0.0.1:%d", port)
	}
	p("  %s", o.Frontend)
	p("  default_backend be")
	p("backend be")
	p("  %s", o.Backend)
	for i, s := range o.Servers {
		p("  server s%d %s", i, s)
	}
	return b.String()
}

// reload makes the master start a new worker and stop the old one softly
// (master-worker mode only), and waits until the master says so. A
// SIGUSR2 that reaches the master in its first moments is sometimes
// dropped without a word (2.6.12, seen with a TLS frontend): then it is
// sent again.
func (h *haproxy) reload(t *testing.T) {
	t.Helper()
	const said = "Reloading HAProxy"
	before := strings.Count(h.output(), said)
	for try := 1; try <= 5; try++ {
		h.signal(t, syscall.SIGUSR2)
		for range 30 {
			if strings.Count(h.output(), said) > before {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Logf("haproxy: no %q 300ms after SIGUSR2 number %d", said, try)
	}
	t.Fatalf("haproxy did not reload:\n%s", h.output())
}
