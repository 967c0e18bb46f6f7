// Package sfvdiff holds only tests: fuzz targets that read each input
// with both the library's structured-field reader, internal/sfv, and
// github.com/dunglas/httpsfv, and fail where the two disagree on whether
// it parses or on what it holds. It is a module of its own so that the
// library's go.mod never requires httpsfv.
package sfvdiff
