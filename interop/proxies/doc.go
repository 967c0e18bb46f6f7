// Package proxies holds tests of retry.Transport behind real reverse
// proxies, Debian's nginx and haproxy, run as the tests' own child
// processes on loopback ports, in front of a Go upstream that counts every
// request it receives. It has no API; its tests are the point.
//
// Each test counts what reached the upstream: a proxy's 502, 503 or 504
// answers, its timeouts, its keep-alive closes, its reloads and its early
// answers to uploads must never make a request run twice that may not run
// twice. The proxies are configured without retries of their own (nginx
// proxy_next_upstream off, haproxy retries 0), so the counts are the
// Transport's; TestProxyRetriesMultiply measures what their own retries
// add.
//
// The tests need the nginx and haproxy binaries (Debian's packages nginx
// and haproxy). A missing binary skips its tests, or fails them when the
// environment has CI=true.
package proxies
