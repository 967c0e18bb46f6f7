package interop_test

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// dechunk stands in front of gofakes3, which stores an aws-chunked upload
// as it arrives, encoding and all: it decodes the body of a request sent
// with Content-Encoding: aws-chunked (the SDK's default for uploads over
// TLS, carrying a trailing checksum), checks the trailing CRC32, and hands
// next the plain body. A body that does not decode, or whose checksum
// does not match, is refused with 400.
func dechunk(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Content-Encoding") != "aws-chunked" {
			next.ServeHTTP(w, r)
			return
		}
		data, err := decodeAWSChunked(r.Body, r.Header.Get("X-Amz-Trailer"))
		if err == nil && r.Header.Get("X-Amz-Decoded-Content-Length") != strconv.Itoa(len(data)) {
			err = fmt.Errorf("decoded %d bytes, x-amz-decoded-content-length says %s",
				len(data), r.Header.Get("X-Amz-Decoded-Content-Length"))
		}
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, "<Error><Code>InvalidRequest</Code><Message>%s</Message></Error>", err)
			return
		}
		r2 := r.Clone(r.Context())
		r2.Body = io.NopCloser(bytes.NewReader(data))
		r2.ContentLength = int64(len(data))
		r2.Header.Set("Content-Length", strconv.Itoa(len(data)))
		r2.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
		for _, h := range []string{"Content-Encoding", "X-Amz-Decoded-Content-Length", "X-Amz-Trailer"} {
			r2.Header.Del(h)
		}
		next.ServeHTTP(w, r2)
	})
}

// decodeAWSChunked reads an unsigned aws-chunked body: chunks of
// "<hex size>\r\n<data>\r\n", a last chunk "0\r\n", trailer lines
// "name:value\r\n" and "\r\n". trailer names the one trailing checksum the
// body must carry; only x-amz-checksum-crc32 is known.
func decodeAWSChunked(body io.Reader, trailer string) ([]byte, error) {
	if trailer != "x-amz-checksum-crc32" {
		return nil, fmt.Errorf("trailer %q: only x-amz-checksum-crc32 is known", trailer)
	}
	br := bufio.NewReader(body)
	line := func() (string, error) {
		s, err := br.ReadString('\n')
		if err != nil {
			return "", fmt.Errorf("aws-chunked: %w", err)
		}
		s, ok := strings.CutSuffix(s, "\r\n")
		if !ok {
			return "", errors.New("aws-chunked: a line without CRLF")
		}
		return s, nil
	}
	var data []byte
	for {
		l, err := line()
		if err != nil {
			return nil, err
		}
		size, err := strconv.ParseInt(l, 16, 32)
		if err != nil || size < 0 {
			return nil, fmt.Errorf("aws-chunked: chunk size %q", l)
		}
		if size == 0 {
			break
		}
		start := len(data)
		data = append(data, make([]byte, size)...)
		if _, err := io.ReadFull(br, data[start:]); err != nil {
			return nil, fmt.Errorf("aws-chunked: chunk of %d bytes: %w", size, err)
		}
		if l, err := line(); err != nil || l != "" {
			return nil, fmt.Errorf("aws-chunked: no CRLF after a chunk (%v)", err)
		}
	}
	var sum string
	for {
		l, err := line()
		if err != nil {
			return nil, err
		}
		if l == "" {
			break
		}
		if name, v, ok := strings.Cut(l, ":"); ok && name == trailer {
			sum = v
		}
	}
	var want [4]byte
	binary.BigEndian.PutUint32(want[:], crc32.ChecksumIEEE(data))
	if got := base64.StdEncoding.EncodeToString(want[:]); sum != got {
		return nil, fmt.Errorf("aws-chunked: trailing %s %q, the data's is %q", trailer, sum, got)
	}
	return data, nil
}

func TestDecodeAWSChunked(t *testing.T) {
	t.Parallel()
	const good = "5\r\nhello\r\n6\r\n world\r\n0\r\nx-amz-checksum-crc32:DUoRhQ==\r\n\r\n"
	tests := []struct {
		name    string
		body    string
		want    string
		wantErr bool
	}{
		{name: "two chunks", body: good, want: "hello world"},
		{name: "wrong checksum", body: strings.Replace(good, "DUoRhQ==", "AAAAAA==", 1), wantErr: true},
		{name: "no trailer", body: "5\r\nhello\r\n0\r\n\r\n", wantErr: true},
		{name: "cut short", body: good[:12], wantErr: true},
		{name: "chunk longer than said", body: "4\r\nhello\r\n0\r\n\r\n", wantErr: true},
		{name: "bad size", body: "zz\r\nhello\r\n", wantErr: true},
		{name: "negative size", body: "-5\r\nhello\r\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeAWSChunked(strings.NewReader(tt.body), "x-amz-checksum-crc32")
			if (err != nil) != tt.wantErr {
				t.Fatalf("decodeAWSChunked error = %v, want error %v", err, tt.wantErr)
			}
			if err == nil && string(got) != tt.want {
				t.Errorf("decodeAWSChunked = %q, want %q", got, tt.want)
			}
		})
	}
}
