package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRunWritesTheChart(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "herd.svg")
	var out strings.Builder
	if err := run([]string{"-svg", path}, &out); err != nil {
		t.Fatalf("run: %v", err)
	}
	svg, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading the chart: %v", err)
	}
	if len(svg) == 0 || !strings.Contains(string(svg), "<svg") {
		t.Fatalf("chart is not an SVG: %.100q", svg)
	}
	for _, s := range Strategies() {
		if !strings.Contains(string(svg), s.Name) {
			t.Errorf("chart has no legend entry for %q", s.Name)
		}
		if !strings.Contains(out.String(), s.Name) {
			t.Errorf("table has no row for %q:\n%s", s.Name, out.String())
		}
	}
	if !strings.Contains(out.String(), "chart: "+path) {
		t.Errorf("output does not name the chart:\n%s", out.String())
	}
}

// TestRunWritesNoChartUnlessAsked keeps the tracked herd.svg safe from a
// run with other flags: only -svg writes a file.
func TestRunWritesNoChartUnlessAsked(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir) // not parallel: it changes the working directory
	var out strings.Builder
	if err := run([]string{"-clients", "50", "-seed", "7"}, &out); err != nil {
		t.Fatalf("run: %v", err)
	}
	files, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 0 || strings.Contains(out.String(), "chart:") {
		t.Errorf("wrote %d files, output:\n%s", len(files), out.String())
	}
}

func TestRunMarkdown(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	if err := run([]string{"-markdown", "-svg", ""}, &out); err != nil {
		t.Fatalf("run: %v", err)
	}
	if !strings.Contains(out.String(), "| strategy | calls |") || strings.Contains(out.String(), "chart:") {
		t.Errorf("want a markdown table and no chart:\n%s", out.String())
	}
}

func TestRunAWSModel(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	if err := run([]string{"-model=aws", "-aws-clients=5,10", "-aws-runs=3"}, &out); err != nil {
		t.Fatalf("run: %v", err)
	}
	for _, want := range []string{"calls (work):", "completion time:", "decorrelated jitter", "\n10 "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
	}{
		{name: "unknown model", args: []string{"-model=mars"}},
		{name: "bad level", args: []string{"-model=aws", "-aws-clients=10,x"}},
		{name: "no clients", args: []string{"-clients=0", "-svg="}},
		{name: "zero chart span", args: []string{"-chart=0"}},
		{name: "stray argument", args: []string{"extra"}},
		{name: "unknown flag", args: []string{"-nope"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if err := run(tt.args, &strings.Builder{}); err == nil {
				t.Errorf("run(%q) = nil error, want one", tt.args)
			}
		})
	}
}
