package interop_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// stripeMockVersion is the stripe-mock the tests install when none is on
// PATH. stripe-mock answers every call from the OpenAPI spec and fixtures
// bundled with it, so it needs no network once built.
const stripeMockVersion = "v0.203.0"

// stripeMock is the one stripe-mock process the tests share: it keeps no
// state between requests, so one serves every test.
var stripeMock struct {
	once sync.Once
	cmd  *exec.Cmd
	url  *url.URL
	err  error
	done chan struct{} // closed when the process has exited and its output is drained
}

// stripeMockURL returns the address of a running stripe-mock, starting it
// on a free loopback port the first time. It fails the test when
// stripe-mock can be neither found nor installed.
func stripeMockURL(t *testing.T) *url.URL {
	t.Helper()
	stripeMock.once.Do(func() { stripeMock.url, stripeMock.err = startStripeMock() })
	if stripeMock.err != nil {
		t.Fatalf("stripe-mock: %v", stripeMock.err)
	}
	return stripeMock.url
}

// stripeMockProxy returns a reverse proxy to the shared stripe-mock.
func stripeMockProxy(t *testing.T) *httputil.ReverseProxy {
	u := stripeMockURL(t)
	rp := httputil.NewSingleHostReverseProxy(u)
	tr := plainTransport()
	t.Cleanup(tr.CloseIdleConnections)
	rp.Transport = tr
	return rp
}

// stripeMockBinary returns stripe-mock from PATH, or installs the pinned
// version with go install into a cache directory of its own (named by the
// version, so a new pin installs afresh).
func stripeMockBinary() (string, error) {
	if p, err := exec.LookPath("stripe-mock"); err == nil {
		return p, nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	gobin := filepath.Join(cache, "retrykit-interop", "stripe-mock-"+stripeMockVersion)
	bin := filepath.Join(gobin, "stripe-mock")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	goTool := filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		goTool = "go"
	}
	cmd := exec.Command(goTool, "install", "github.com/stripe/stripe-mock@"+stripeMockVersion)
	cmd.Dir = os.TempDir() // outside this module: go install pkg@version needs no go.mod
	cmd.Env = append(os.Environ(), "GOBIN="+gobin, "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go install github.com/stripe/stripe-mock@%s: %v\n%s", stripeMockVersion, err, out)
	}
	return bin, nil
}

// startStripeMock starts stripe-mock on loopback ports the system chooses
// and waits until it says where it listens.
func startStripeMock() (*url.URL, error) {
	bin, err := stripeMockBinary()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "-http-addr", "127.0.0.1:", "-https-addr", "127.0.0.1:")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	stripeMock.cmd = cmd
	stripeMock.done = make(chan struct{})
	addr := make(chan string, 1)
	go func() {
		defer close(stripeMock.done)
		sc := bufio.NewScanner(out)
		const prefix = "Listening for HTTP at address: "
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), prefix); ok {
				addr <- a
				break
			}
		}
		_, _ = io.Copy(io.Discard, out) // until the process exits
		_ = cmd.Wait()
	}()
	select {
	case a := <-addr:
		return &url.URL{Scheme: "http", Host: a}, nil
	case <-stripeMock.done:
		return nil, errors.New("stripe-mock exited before listening")
	case <-time.After(time.Minute):
		stopStripeMock()
		return nil, errors.New("stripe-mock did not listen within a minute")
	}
}

// stopStripeMock ends the stripe-mock process, if one was started, and
// waits for it.
func stopStripeMock() {
	if stripeMock.cmd == nil {
		return
	}
	_ = stripeMock.cmd.Process.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	select {
	case <-stripeMock.done:
	case <-ctx.Done():
	}
	stripeMock.cmd = nil
}
