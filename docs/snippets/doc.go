// Package snippets holds every Go snippet of README.md and docs/, verbatim,
// in test files that the Go toolchain compiles and, where a snippet can run
// without the network, runs. Each snippet in the Markdown names its file
// here; the repository's docs test checks that the snippet's text is in
// that file, so a snippet that stops compiling fails the build.
//
// It is a module of its own because some snippets use the OpenAI and
// Anthropic SDKs and gobreaker, which the library's go.mod never gains.
package snippets
