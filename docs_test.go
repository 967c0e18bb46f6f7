package retry_test

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// readmeLimit is the most README.md may weigh: it is the front door, and
// the detail belongs in the guides under docs/.
const readmeLimit = 12 << 10

// docFiles returns README.md and every guide under docs/.
func docFiles(t *testing.T) []string {
	t.Helper()
	guides, err := filepath.Glob(filepath.Join("docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(guides) == 0 {
		t.Fatal("no guides under docs/")
	}
	return append([]string{"README.md", "CHANGELOG.md"}, guides...)
}

func TestReadmeSize(t *testing.T) {
	fi, err := os.Stat("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > readmeLimit {
		t.Errorf("README.md is %d bytes, over the limit of %d: move detail to docs/", fi.Size(), readmeLimit)
	}
}

// mdLink matches the target of a Markdown link or image: [text](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocLinks checks that every relative link of the README and the guides
// points at a file or directory that exists, so a moved guide or example
// cannot leave a dead link behind.
func TestDocLinks(t *testing.T) {
	for _, doc := range docFiles(t) {
		inCode := false
		for i, line := range readDocLines(t, doc) {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				inCode = !inCode // a fence opens or closes a code block
			}
			if inCode {
				continue // code is not Markdown: a[i](x) is no link
			}
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") || strings.HasPrefix(target, "#") {
					continue
				}
				target, _, _ = strings.Cut(target, "#")
				path := filepath.Join(filepath.Dir(doc), filepath.FromSlash(target))
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s:%d: link to %s: %v", doc, i+1, m[1], err)
				}
			}
		}
	}
}

// snippetMark names, on the line before a ```go fence, the Go file that
// holds the snippet verbatim, relative to the repository root.
var snippetMark = regexp.MustCompile(`^<!-- snippet: (\S+\.go) -->$`)

// TestDocSnippets checks that every Go snippet of the README and the guides
// appears, line for line, in the Go file it names. Those files are compiled
// (and, where a snippet can run, run) by go test: the root package's and
// retrytest's by make test, docs/snippets' (which needs the SDKs) by make
// check. Indentation and blank lines are ignored, since a snippet sits
// inside a function there.
func TestDocSnippets(t *testing.T) {
	count := 0
	for _, doc := range docFiles(t) {
		lines := readDocLines(t, doc)
		for i := 0; i < len(lines); i++ {
			if strings.TrimSpace(lines[i]) != "```go" {
				continue
			}
			start := i
			var body []string
			for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
				body = append(body, lines[i])
			}
			count++
			if start == 0 || !snippetMark.MatchString(lines[start-1]) {
				t.Errorf("%s:%d: a Go snippet without <!-- snippet: path.go --> on the line before", doc, start+1)
				continue
			}
			file := snippetMark.FindStringSubmatch(lines[start-1])[1]
			src := readDocLines(t, filepath.FromSlash(file))
			if !containsRun(snippetLines(src), snippetLines(body)) {
				t.Errorf("%s:%d: the snippet is not in %s, as written", doc, start+1, file)
			}
		}
	}
	if count == 0 {
		t.Error("no Go snippets found; the test is looking in the wrong place")
	}
}

// snippetLines drops blank lines and leading and trailing spaces, so that a
// snippet matches its copy inside a function, whatever the indentation.
func snippetLines(lines []string) []string {
	var out []string
	for _, l := range lines {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// containsRun reports whether want occurs in src as a run of lines.
func containsRun(src, want []string) bool {
	if len(want) == 0 {
		return false
	}
	for i := 0; i+len(want) <= len(src); i++ {
		if slices.Equal(src[i:i+len(want)], want) {
			return true
		}
	}
	return false
}

func readDocLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}
