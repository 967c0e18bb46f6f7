package proxies_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// nginxOpts configure an nginx in front of one or more upstreams.
type nginxOpts struct {
	// Upstreams are the host:port of the servers of the upstream block
	// proxy_pass sends to, in order.
	Upstreams []string
	// ServerParams follow each server of the upstream block, such as
	// max_fails=0. Empty keeps nginx's defaults (max_fails=1
	// fail_timeout=10s: a server that failed once is left out for 10s).
	ServerParams string
	// Main, HTTP and Location are directives added to the main context,
	// the http context and location /. nginx refuses a directive given
	// twice, so a default of location / (locationDefaults) is left out
	// when Location sets it.
	Main, HTTP, Location string
	// TLS, when set, makes the server listen with ssl and http2 on these
	// files.
	TLS *tlsFiles
}

// nginx is a running nginx: its master process, as the test's child.
type nginx struct {
	*process
	url string // http:// or https://127.0.0.1:port
	dir string // its prefix: config, logs and temp paths
}

// locationDefaults are location /'s directives unless Location sets them:
// no retries of nginx's own, so that what reaches the upstream is the
// Transport's doing.
var locationDefaults = []string{
	"proxy_next_upstream off;",
	"proxy_http_version 1.1;",
	"proxy_connect_timeout 1s;",
	"proxy_read_timeout 10s;",
}

// startNginx runs nginx as the test's child on a free loopback port, with
// its config, pid file, logs and temp paths in a temp dir, and stops it
// when the test ends.
func startNginx(t *testing.T, o nginxOpts) *nginx {
	t.Helper()
	bin := binary(t, "nginx")
	dir := t.TempDir()
	conf := filepath.Join(dir, "nginx.conf")
	p, ports := launch(t, 1, func(ports []int) (*process, []string) {
		if err := os.WriteFile(conf, []byte(nginxConf(dir, ports[0], o)), 0o600); err != nil {
			t.Fatal(err)
		}
		// -e: the error log from the start, before the config is read;
		// else nginx opens its compiled-in /var/log/nginx/error.log.
		p := start(t, dir, bin, "-p", dir+"/", "-c", conf, "-e", filepath.Join(dir, "error.log"))
		return p, []string{fmt.Sprintf("127.0.0.1:%d", ports[0])}
	})
	scheme := "http"
	if o.TLS != nil {
		scheme = "https"
	}
	n := &nginx{process: p, url: fmt.Sprintf("%s://127.0.0.1:%d/", scheme, ports[0]), dir: dir}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("nginx error.log:\n%s", n.errorLog())
		}
	})
	return n
}

// nginxConf writes the config: master and one worker (reloads need the
// master), running as root when the test does, since the temp dir is not
// open to nginx's default user.
func nginxConf(dir string, port int, o nginxOpts) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("daemon off;")
	p("master_process on;")
	p("worker_processes 1;")
	if os.Geteuid() == 0 {
		p("user root root;")
	}
	p("pid %s/nginx.pid;", dir)
	p("error_log %s/error.log notice;", dir)
	p("%s", o.Main)
	p("events { worker_connections 256; }")
	p("http {")
	p("  log_format tries '$request_method $status call=$http_x_call_id upstream=$upstream_addr statuses=$upstream_status';")
	p("  access_log %s/access.log tries;", dir)
	for _, tmp := range []string{"client_body", "proxy", "fastcgi", "uwsgi", "scgi"} {
		p("  %s_temp_path %s/%s;", tmp, dir, tmp)
	}
	p("  %s", o.HTTP)
	p("  upstream backend {")
	for _, u := range o.Upstreams {
		p("    server %s %s;", u, o.ServerParams)
	}
	p("  }")
	p("  server {")
	if o.TLS != nil {
		p("    listen 127.0.0.1:%d ssl http2;", port)
		p("    ssl_certificate %s;", o.TLS.Cert)
		p("    ssl_certificate_key %s;", o.TLS.Key)
	} else {
		p("    listen 127.0.0.1:%d;", port)
	}
	p("    location / {")
	p("      proxy_pass http://backend;")
	for _, d := range locationDefaults {
		if name, _, _ := strings.Cut(d, " "); !strings.Contains(o.Location, name+" ") {
			p("      %s", d)
		}
	}
	p("      %s", o.Location)
	p("    }")
	p("  }")
	p("}")
	return b.String()
}

// reload makes the master read its config again and replace its workers:
// the old worker stops gracefully, within worker_shutdown_timeout.
func (n *nginx) reload(t *testing.T) { n.signal(t, syscall.SIGHUP) }

// errorLog returns the error log so far.
func (n *nginx) errorLog() string {
	b, _ := os.ReadFile(filepath.Join(n.dir, "error.log"))
	return string(b)
}

// accessLog returns the access log so far: one line per request, with the
// upstream servers nginx tried and their statuses.
func (n *nginx) accessLog() string {
	b, _ := os.ReadFile(filepath.Join(n.dir, "access.log"))
	return string(b)
}
