package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v4"
)

// sdkModule ships the recordings replayed here: real responses of
// Anthropic's API, headers and all, that its tool runner's tests play back
// with go-vcr. The version is the one go.mod requires.
const sdkModule = "github.com/anthropics/anthropic-sdk-go/v2"

// cassetteGlob names the recordings inside sdkModule's directory.
const cassetteGlob = "toolrunner/testdata/cassettes/*.yaml"

// cassette is one go-vcr recording (format version 1): the interactions of
// one test, in the order they happened.
type cassette struct {
	name         string        // the file's name without .yaml
	Version      int           `yaml:"version"`
	Interactions []interaction `yaml:"interactions"`
}

// interaction is one request and the response it got. Fields go-vcr
// writes and the replay needs not (form, duration) are not read.
type interaction struct {
	Request struct {
		Body    string              `yaml:"body"`
		Headers map[string][]string `yaml:"headers"`
		URL     string              `yaml:"url"`
		Method  string              `yaml:"method"`
	} `yaml:"request"`
	Response recordedResponse `yaml:"response"`
}

// recordedResponse is the response of an interaction.
type recordedResponse struct {
	Body    string              `yaml:"body"`
	Headers map[string][]string `yaml:"headers"`
	Status  string              `yaml:"status"`
	Code    int                 `yaml:"code"`
}

// interactionLine starts each interaction of a go-vcr file: counted in the
// text, it checks that the parse found every one.
var interactionLine = regexp.MustCompile(`(?m)^- request:`)

// loadCassettes returns every recording sdkModule ships, in the order of
// their names. When they cannot be found the test is skipped, unless CI is
// set: then it fails, so that CI cannot pass without replaying them.
func loadCassettes(t *testing.T) []cassette {
	t.Helper()
	paths, err := cassettePaths()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set but the recordings cannot be found: %v", err)
		}
		t.Skipf("the recordings cannot be found: %v", err)
	}
	var cs []cassette
	for _, p := range paths {
		c, err := readCassette(p)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	return cs
}

// cassettePaths finds the recordings in the module cache.
func cassettePaths() ([]string, error) {
	dir, err := sdkDir()
	if err != nil {
		return nil, err
	}
	paths, err := filepath.Glob(filepath.Join(dir, cassetteGlob))
	if err == nil && len(paths) == 0 {
		err = fmt.Errorf("no %s in %s", cassetteGlob, dir)
	}
	return paths, err
}

// sdkDir returns the directory of sdkModule, at the version go.mod
// requires, in the module cache. A version required but not yet in the
// cache is downloaded, from a module proxy only.
func sdkDir() (string, error) {
	var m struct{ Version, Dir string }
	if err := goJSON(&m, nil, "list", "-m", "-json", sdkModule); err != nil {
		return "", err
	}
	if m.Dir != "" {
		return m.Dir, nil
	}
	if m.Version == "" {
		return "", fmt.Errorf("go list -m %s gives no version: go.mod must require it", sdkModule)
	}
	proxy, err := goOut(nil, "env", "GOPROXY")
	if err != nil {
		return "", err
	}
	env := []string{"GOPROXY=" + proxyOnly(strings.TrimSpace(string(proxy)))}
	if err := goJSON(&m, env, "mod", "download", "-json", sdkModule+"@"+m.Version); err != nil {
		return "", err
	}
	if m.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s gives no directory", sdkModule, m.Version)
	}
	return m.Dir, nil
}

// proxyOnly returns the GOPROXY list without "direct", so that a download
// asks a module proxy and never the code's origin. An empty list is the
// public proxy; "off" stays off.
func proxyOnly(list string) string {
	var keep []string
	for _, p := range strings.FieldsFunc(list, func(r rune) bool { return r == ',' || r == '|' }) {
		if p != "direct" {
			keep = append(keep, p)
		}
	}
	if len(keep) == 0 {
		return "https://proxy.golang.org"
	}
	return strings.Join(keep, ",")
}

// goJSON runs the go command in this module with env added and decodes
// its JSON output into v.
func goJSON(v any, env []string, args ...string) error {
	out, err := goOut(env, args...)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(out, v); err != nil {
		return fmt.Errorf("go %s: %v", strings.Join(args, " "), err)
	}
	return nil
}

// goOut runs the go command in this module, go.mod and go.sum read only,
// with env added, and returns its standard output.
func goOut(env []string, args ...string) ([]byte, error) {
	cmd := exec.Command("go", args...)
	cmd.Env = append(append(os.Environ(), "GOFLAGS=-mod=readonly"), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return out, nil
}

// readCassette parses one go-vcr file and checks that it read as many
// interactions as the file holds.
func readCassette(path string) (cassette, error) {
	c := cassette{name: strings.TrimSuffix(filepath.Base(path), ".yaml")}
	b, err := os.ReadFile(path)
	if err != nil {
		return c, err
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("%s: %v", path, err)
	}
	if c.Version != 1 {
		return c, fmt.Errorf("%s: go-vcr format version %d; this reader knows 1", path, c.Version)
	}
	if n := len(interactionLine.FindAll(b, -1)); n != len(c.Interactions) {
		return c, fmt.Errorf("%s: read %d interactions, but the file starts %d", path, len(c.Interactions), n)
	}
	return c, nil
}

func TestCassettesRead(t *testing.T) {
	total := 0
	for _, c := range loadCassettes(t) {
		if len(c.Interactions) == 0 {
			t.Errorf("%s: no interactions", c.name)
		}
		for i, in := range c.Interactions {
			if in.Request.Method == "" || in.Request.URL == "" || in.Response.Code == 0 {
				t.Errorf("%s #%d: method %q, URL %q, status %d: the interaction is incomplete",
					c.name, i+1, in.Request.Method, in.Request.URL, in.Response.Code)
			}
		}
		total += len(c.Interactions)
	}
	t.Logf("%d interactions read", total)
}
