//go:build linux

package anthropicsuite_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

const (
	sdkModule  = "github.com/anthropics/anthropic-sdk-go/v2"
	sdkVersion = "v2.15.0"

	retryModule = "github.com/retrykit/retry"
	// retryVersion is the version the copy requires the library at; a
	// replace points it at this checkout.
	retryVersion = "v0.0.0-00010101000000-000000000000"

	// suiteFile is the file added to the copy, from testdata.
	suiteFile = "retry_transport_test.go"
)

// copySDK fetches the SDK's module through the Go module proxy (or finds
// it in the module cache), copies it into dir/sdk, writable, adds
// suiteFile to it, and makes it require the library from this checkout.
// It returns the copy's path.
func copySDK(t *testing.T, dir string) string {
	t.Helper()
	out := run(t, ".", nil, "go", "mod", "download", "-json", sdkModule+"@"+sdkVersion)
	var mod struct{ Dir, Error string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Error != "" || mod.Dir == "" {
		t.Fatalf("go mod download %s@%s: %v %s\n%s", sdkModule, sdkVersion, err, mod.Error, out)
	}
	sdk := filepath.Join(dir, "sdk")
	// os.CopyFS makes files 0666 and directories 0777 (less the umask):
	// the module cache's copy is read-only.
	if err := os.CopyFS(sdk, os.DirFS(mod.Dir)); err != nil {
		t.Fatalf("copying %s: %v", mod.Dir, err)
	}
	src, err := os.ReadFile(filepath.Join("testdata", suiteFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(sdk, suiteFile)); err == nil {
		t.Fatalf("the SDK has a %s of its own; rename testdata/%s", suiteFile, suiteFile)
	}
	writeFile(t, filepath.Join(sdk, suiteFile), src)

	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "go.mod")); err != nil || !bytes.HasPrefix(b, []byte("module "+retryModule+"\n")) {
		t.Fatalf("%s is not the root of %s's checkout (%v)", root, retryModule, err)
	}
	run(t, sdk, goEnv, "go", "mod", "edit", "-replace", retryModule+"="+root)
	// Also raises the copy's go line to the library's (1.26).
	run(t, sdk, goEnv, "go", "get", retryModule+"@"+retryVersion)
	return sdk
}

// goEnv keeps a go.work outside the copy from reaching into it.
var goEnv = []string{"GOWORK=off"}

// buildSuite compiles the tests of the SDK's root package, with suiteFile,
// into dir. -trimpath keeps the copy's temporary path out of the build
// cache's keys, so a second run compiles nothing anew.
func buildSuite(t *testing.T, sdk, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "anthropic.test")
	start := time.Now()
	run(t, sdk, goEnv, "go", "test", "-c", "-race", "-trimpath", "-o", bin, ".")
	t.Logf("built the SDK's tests with -race in %s", time.Since(start).Round(time.Second))
	return bin
}

// testFunc matches a top-level test's declaration.
var testFunc = regexp.MustCompile(`(?m)^func (Test\w+)\(t \*testing\.T\)`)

// mockTests returns the tests that reach the mock server: those in the
// files of the root package that read TEST_API_BASE_URL, the mock's
// address. The root package's other tests use servers of their own, which
// the Transport never sees.
func mockTests(t *testing.T, sdk string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(sdk, "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Base(f) == suiteFile || !bytes.Contains(b, []byte("TEST_API_BASE_URL")) {
			continue
		}
		for _, m := range testFunc.FindAllSubmatch(b, -1) {
			names = append(names, string(m[1]))
		}
	}
	if len(names) == 0 {
		t.Fatalf("no test of the SDK's root package reads TEST_API_BASE_URL: found none to run against the mock")
	}
	sort.Strings(names)
	return names
}

// testResults is how each test of a run ended ("pass", "fail" or "skip"),
// subtests included, with the output of those that failed.
type testResults struct {
	ended  map[string]string
	output map[string][]string
}

// with returns the tests that ended how, sorted.
func (r testResults) with(how string) []string {
	var out []string
	for name, h := range r.ended {
		if h == how {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

func (r testResults) count(how string) int { return len(r.with(how)) }

// runTests runs names of the compiled tests in sdk, with env, through
// test2json. Failing tests are no error here: the caller compares runs.
func runTests(t *testing.T, bin, sdk string, names, env []string) testResults {
	t.Helper()
	cmd := exec.Command("go", "tool", "test2json", "-t", "-p", sdkModule, bin,
		"-test.v=test2json", "-test.count=1", "-test.timeout=2m",
		"-test.run", "^("+strings.Join(names, "|")+")$")
	cmd.Dir = sdk
	cmd.Env = append(suiteEnv(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	res := testResults{ended: map[string]string{}, output: map[string][]string{}}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 16<<20)
	var tail []string // output outside any test: TestMain's
	for sc.Scan() {
		var e struct{ Action, Test, Output string }
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue
		}
		switch {
		case e.Action == "output" && e.Test != "":
			res.output[e.Test] = append(res.output[e.Test], e.Output)
		case e.Action == "output":
			tail = append(tail, e.Output)
		case e.Test != "" && (e.Action == "pass" || e.Action == "fail" || e.Action == "skip"):
			res.ended[e.Test] = e.Action
		}
	}
	if len(res.ended) == 0 {
		t.Fatalf("the SDK's tests ran none (%v):\n%s%s", err, strings.Join(tail, ""), stderr.String())
	}
	return res
}

// suiteEnv is the test's environment less what would steer the SDK's
// tests elsewhere: its own API settings, a mock address, a request to skip
// the mock's tests.
func suiteEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "ANTHROPIC_") || strings.HasPrefix(name, "RETRY_SUITE_") ||
			name == "TEST_API_BASE_URL" || name == "SKIP_MOCK_TESTS" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, goEnv...)
}
