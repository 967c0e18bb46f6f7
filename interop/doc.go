// Package interop holds tests of real SDKs (stripe-go, aws-sdk-go-v2,
// go-github) sending through retry.Transport with their own retries
// turned off, against realistic servers: stripe-mock, gofakes3 and a fake
// GitHub. It has no API; its tests are the point.
package interop
