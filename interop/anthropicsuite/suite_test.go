//go:build linux

package anthropicsuite_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// faultEvery makes every faultEvery-th attempt under the Transport a
// fault, in the faulty run.
const faultEvery = 3

// TestAnthropicSDKSuite runs anthropic-sdk-go's tests that reach its mock
// server twice, each against a fresh mock: through retry.Transport without
// faults, then with a fault on every third attempt. Every test that passes
// without faults must pass with them; no request may reach the mock marked
// as the SDK's own retry (X-Stainless-Retry-Count of 1 or more: the
// Transport gave up and the SDK tried again); the Transport must report
// no call it gave up on, and wait out every 429's Retry-After; and the mock,
// which checks every request against the API's schema, must reject nothing
// with faults that it accepted without them.
func TestAnthropicSDKSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the SDK's tests, a minute or more; skipped with -short")
	}
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: the SDK's mock server is an npm package; install Node.js and npm "+
				"(Debian: apt-get install nodejs npm)", tool)
		}
	}
	began := time.Now()
	dir := t.TempDir()
	s := &suite{dir: dir}
	s.sdk = copySDK(t, dir)
	mockDir := filepath.Join(dir, "mock")
	if err := os.Mkdir(mockDir, 0o755); err != nil {
		t.Fatal(err)
	}
	s.mockBin, s.spec = installMock(t, s.sdk, mockDir)
	s.testBin = buildSuite(t, s.sdk, dir)
	s.names = mockTests(t, s.sdk)
	t.Logf("%s@%s: %d tests reach the mock", sdkModule, sdkVersion, len(s.names))

	clean := s.run(t, "without-faults", 0)
	faulty := s.run(t, "with-faults", faultEvery)
	if clean.tests.count("pass") == 0 {
		t.Fatalf("no test passed against the mock without faults; the first failures:\n%s", clean.failures(3))
	}
	for _, r := range []suiteRun{clean, faulty} {
		r.check(t)
	}
	for _, kind := range faultKinds {
		if faulty.report.Faults[kind] == 0 {
			t.Errorf("with faults: no %s was injected", kind)
		}
	}
	var lost []string
	for _, name := range clean.tests.with("pass") {
		if faulty.tests.ended[name] != "pass" {
			lost = append(lost, name)
		}
	}
	if len(lost) > 0 {
		t.Errorf("%d tests passed without faults and not with them: %s\n%s", len(lost),
			strings.Join(lost, ", "), faulty.failuresOf(lost, 3))
	}
	if extra := newRejections(clean.seen.rejected, faulty.seen.rejected); len(extra) > 0 {
		t.Errorf("with faults, the mock rejected requests it accepted without them (by method, path, code):\n\t%s",
			strings.Join(extra, "\n\t"))
	}
	t.Logf("%s in all", time.Since(began).Round(time.Second))
}

// suite is what the runs share.
type suite struct {
	dir, sdk      string
	mockBin, spec string
	testBin       string
	names         []string // the tests to run
}

// suiteReport is what testdata/retry_transport_test.go writes.
type suiteReport struct {
	Attempts int            `json:"attempts"`
	Faults   map[string]int `json:"faults"`
	Retries  int            `json:"retries"`
	Hinted   int            `json:"hinted"`
	Calls    int            `json:"calls"`
	Problems []string       `json:"problems"`
}

// suiteRun is one run of the SDK's tests against a fresh mock server.
type suiteRun struct {
	name   string
	tests  testResults
	seen   mockSeen
	report suiteReport
}

// run runs the tests against a fresh mock server, with a fault on every
// every-th attempt (0: none).
func (s *suite) run(t *testing.T, name string, every int) suiteRun {
	t.Helper()
	m := startMock(t, s.mockBin, s.spec, s.dir, name)
	t.Cleanup(m.stop)
	reportPath := filepath.Join(s.dir, name+".json")
	start := time.Now()
	tests := runTests(t, s.testBin, s.sdk, s.names, []string{
		"TEST_API_BASE_URL=" + m.url,
		"RETRY_SUITE_FAULTS=" + strconv.Itoa(every),
		"RETRY_SUITE_REPORT=" + reportPath,
	})
	took := time.Since(start)
	m.stop() // its log is whole once it has exited
	r := suiteRun{name: name, tests: tests, seen: readMockLog(t, m.log)}
	b, err := os.ReadFile(reportPath)
	if err == nil {
		err = json.Unmarshal(b, &r.report)
	}
	if err != nil {
		t.Fatalf("%s: no report from %s's TestMain: %v", name, suiteFile, err)
	}
	rep := r.report
	t.Logf("%s: %d passed, %d failed, %d skipped (%s); %d calls, %d attempts, %s, %d retries "+
		"(%d after Retry-After); the mock saw %d requests",
		name, tests.count("pass"), tests.count("fail"), tests.count("skip"), took.Round(100*time.Millisecond),
		rep.Calls, rep.Attempts, faultSummary(rep.Faults), rep.Retries, rep.Hinted, r.seen.requests)
	if failed := tests.count("fail"); failed > 0 && every == 0 {
		t.Logf("%s: failing without faults, so not compared: %s", name, strings.Join(r.tests.with("fail"), ", "))
	}
	return r
}

// check fails t for what no run may show.
func (r suiteRun) check(t *testing.T) {
	t.Helper()
	if r.report.Calls == 0 {
		t.Errorf("%s: the Transport saw no call: the SDK's default client did not send through "+
			"http.DefaultTransport", r.name)
	}
	if len(r.seen.resent) > 0 {
		t.Errorf("%s: %d requests reached the mock as the SDK's own retries, after the Transport gave up:\n\t%s",
			r.name, len(r.seen.resent), strings.Join(first(r.seen.resent, 20), "\n\t"))
	}
	if len(r.report.Problems) > 0 {
		t.Errorf("%s: %d problems the Transport reported:\n\t%s", r.name, len(r.report.Problems),
			strings.Join(first(r.report.Problems, 20), "\n\t"))
	}
}

// failures returns the output of the first n failed tests.
func (r suiteRun) failures(n int) string { return r.failuresOf(r.tests.with("fail"), n) }

// failuresOf returns the output of the first n of names.
func (r suiteRun) failuresOf(names []string, n int) string {
	var b strings.Builder
	for _, name := range first(names, n) {
		fmt.Fprintf(&b, "--- %s (%s):\n%s", name, r.tests.ended[name], strings.Join(r.tests.output[name], ""))
	}
	return b.String()
}

func first(s []string, n int) []string { return s[:min(n, len(s))] }

// faultKinds are the faults testdata/retry_transport_test.go injects.
var faultKinds = []string{"503", "429", "reset"}

// faultSummary says how many faults of each kind were injected.
func faultSummary(faults map[string]int) string {
	var kinds []string
	n := 0
	for _, kind := range faultKinds {
		kinds = append(kinds, fmt.Sprintf("%d %s", faults[kind], kind))
		n += faults[kind]
	}
	if n == 0 {
		return "no faults"
	}
	return fmt.Sprintf("%d faults (%s)", n, strings.Join(kinds, ", "))
}
