//go:build linux

package anthropicsuite_test

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// mockReadyTimeout bounds the wait for a started mock server to answer
// its health check; it reads the SDK's spec (4 MiB) first.
const mockReadyTimeout = 30 * time.Second

// mockStopGrace is how long the mock server has to exit after SIGTERM
// before it is killed.
const mockStopGrace = 5 * time.Second

// installMock installs the mock server the SDK's scripts/mock installs, in
// dir, from the SDK's own lock file (scripts/mock-lock.json), used as it
// is: npm ci with the package.json that the lock file's root entry names,
// as scripts/mock writes it. It returns the path of the server's binary
// and of the spec, ungzipped into dir.
func installMock(t *testing.T, sdk, dir string) (bin, spec string) {
	t.Helper()
	lock, err := os.ReadFile(filepath.Join(sdk, "scripts", "mock-lock.json"))
	if err != nil {
		t.Fatalf("the SDK ships no mock-server lock file: %v", err)
	}
	var parsed struct {
		Packages map[string]struct {
			Dependencies map[string]string `json:"dependencies"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(lock, &parsed); err != nil || len(parsed.Packages[""].Dependencies) == 0 {
		t.Fatalf("scripts/mock-lock.json names no dependencies at its root (%v)", err)
	}
	pkg, _ := json.Marshal(map[string]any{"private": true, "dependencies": parsed.Packages[""].Dependencies})
	writeFile(t, filepath.Join(dir, "package.json"), pkg)
	writeFile(t, filepath.Join(dir, "package-lock.json"), lock)
	start := time.Now()
	run(t, dir, nil, "npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error")
	var deps []string
	for name, version := range parsed.Packages[""].Dependencies {
		deps = append(deps, name+"@"+version)
	}
	sort.Strings(deps)
	t.Logf("installed %s from the SDK's scripts/mock-lock.json (npm ci, %s)", strings.Join(deps, ", "),
		time.Since(start).Round(100*time.Millisecond))

	// The package's steady.js starts a binary from a package of its
	// platform; the test starts that binary itself, so that stopping it
	// stops the server.
	bins, _ := filepath.Glob(filepath.Join(dir, "node_modules", "@stdy", "cli-*", "bin", "steady"))
	if len(bins) != 1 {
		t.Fatalf("npm ci installed %d mock-server binaries (node_modules/@stdy/cli-*/bin/steady), want 1: "+
			"no @stdy/cli package for this platform?", len(bins))
	}

	spec = filepath.Join(dir, "spec.json")
	in, err := os.Open(filepath.Join(sdk, "scripts", "mock-spec.json.gz"))
	if err != nil {
		t.Fatalf("the SDK ships no API spec for its mock: %v", err)
	}
	defer in.Close()
	zr, err := gzip.NewReader(in)
	if err != nil {
		t.Fatalf("scripts/mock-spec.json.gz: %v", err)
	}
	out, err := os.Create(spec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, zr); err != nil {
		t.Fatalf("scripts/mock-spec.json.gz: %v", err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return bins[0], spec
}

// mock is a running mock server.
type mock struct {
	url    string // http://127.0.0.1:port
	cmd    *exec.Cmd
	log    string        // its stdout: one JSON object a line
	exited chan struct{} // closed once Wait returned
}

// startMock starts the mock server on a free loopback port, with the
// validator options of the SDK's scripts/mock, logging every request as
// JSON into a new file in dir named after name. Another process may take
// the port between its choice and the server's bind; then it tries
// another.
func startMock(t *testing.T, bin, spec, dir, name string) *mock {
	t.Helper()
	var lastErr error
	for try := range 5 {
		m, err := launchMock(bin, spec, filepath.Join(dir, fmt.Sprintf("%s-%d", name, try)))
		if err == nil {
			return m
		}
		lastErr = err
	}
	t.Fatalf("the mock server did not start: %v", lastErr)
	return nil
}

func launchMock(bin, spec, logBase string) (*mock, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	stdout, err := os.Create(logBase + ".log")
	if err != nil {
		return nil, err
	}
	defer stdout.Close()
	stderr, err := os.Create(logBase + ".err")
	if err != nil {
		return nil, err
	}
	defer stderr.Close()
	cmd := exec.Command(bin, "--host", "127.0.0.1", "-p", strconv.Itoa(port),
		"--log-format", "json", "--log-level", "full", "--no-color",
		"--validator-query-array-format=brackets", "--validator-form-array-format=brackets",
		"--validator-query-object-format=brackets", "--validator-form-object-format=brackets",
		spec)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// Its own process group, and killed with the test's process should
	// that end first (a test binary's timeout runs no cleanup).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	m := &mock{url: "http://127.0.0.1:" + strconv.Itoa(port), cmd: cmd, log: logBase + ".log", exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(m.exited) }()
	client := &http.Client{Timeout: time.Second}
	for deadline := time.Now().Add(mockReadyTimeout); time.Now().Before(deadline); {
		select {
		case <-m.exited:
			msg, _ := os.ReadFile(logBase + ".err")
			return nil, fmt.Errorf("it exited (%v): %s", cmd.ProcessState, strings.TrimSpace(string(msg)))
		case <-time.After(100 * time.Millisecond):
		}
		resp, err := client.Get(m.url + "/_x-steady/health")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return m, nil
			}
		}
	}
	m.stop()
	return nil, fmt.Errorf("it did not answer %s/_x-steady/health within %v", m.url, mockReadyTimeout)
}

// stop ends the server, SIGTERM first, and waits for it. Once it has
// exited, stop does nothing.
func (m *mock) stop() {
	select {
	case <-m.exited:
		return
	default:
	}
	_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-m.exited:
	case <-time.After(mockStopGrace):
		_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
		<-m.exited
	}
}

// mockSeen is what the mock server logged of the requests that reached it.
type mockSeen struct {
	requests int
	// resent lists each request the SDK sent again itself: an
	// X-Stainless-Retry-Count of 1 or more.
	resent []string
	// rejected counts the diagnostics of the requests the mock found wrong,
	// by method, path pattern and code; the health check's GET / is one.
	rejected map[string]int
}

// readMockLog reads the mock server's log, once it has stopped.
func readMockLog(t *testing.T, path string) mockSeen {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := mockSeen{rejected: map[string]int{}}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var e struct {
			Type    string `json:"type"`
			Request struct {
				Method      string            `json:"method"`
				Path        string            `json:"path"`
				PathPattern string            `json:"pathPattern"`
				Headers     map[string]string `json:"headers"`
			} `json:"request"`
			Diagnostics []struct {
				Severity string `json:"severity"`
				Code     string `json:"code"`
			} `json:"diagnostics"`
		}
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Type != "request" {
			continue
		}
		r := e.Request
		seen.requests++
		if n, err := strconv.Atoi(r.Headers["x-stainless-retry-count"]); err == nil && n > 0 {
			seen.resent = append(seen.resent, fmt.Sprintf("%s %s (X-Stainless-Retry-Count: %d)", r.Method, r.Path, n))
		}
		for _, d := range e.Diagnostics {
			if d.Severity == "error" {
				seen.rejected[r.Method+" "+r.PathPattern+" "+d.Code]++
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading the mock server's log: %v", err)
	}
	return seen
}

// newRejections returns the diagnostics in got that were not in base.
func newRejections(base, got map[string]int) []string {
	var out []string
	for k, n := range got {
		if base[k] == 0 {
			out = append(out, fmt.Sprintf("%s (%d times)", k, n))
		}
	}
	sort.Strings(out)
	return out
}

// writeFile writes b to path, or fails the test.
func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// run runs name with args in dir, with env added to the test's
// environment, and returns its standard output; it fails the test with
// the command's output when the command fails.
func run(t *testing.T, dir string, env []string, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s (in %s): %v\n%s%s", name, strings.Join(args, " "), dir, err, out, stderr.String())
	}
	return out
}
