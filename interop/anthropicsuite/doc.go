// Package anthropicsuite runs anthropic-sdk-go's own tests against the
// SDK's mock server, with retry.Transport under the SDK's default client
// and faults under the Transport. It has no API; its test is the point.
//
// TestAnthropicSDKSuite copies the SDK's module (a pinned version) from
// the module cache into a temporary directory, adds
// testdata/retry_transport_test.go to it, installs the mock server from
// the lock file the SDK ships (npm ci), and runs the SDK's tests that
// reach the mock twice, without faults and with them. See the section in
// ../README.md. It needs Node.js and npm, and reaches the Go module proxy
// and the npm registry; it fails, saying what is missing, without them.
package anthropicsuite
