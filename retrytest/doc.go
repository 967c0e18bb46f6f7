// Package retrytest helps test code that retries, without waiting.
//
// [NewServer] starts a loopback HTTP server that answers each request from a
// script of [Step]s (statuses, headers, bodies, delays, hangs, dropped
// connections) and counts the requests and connections it saw. [FakeTime]
// supplies the Clock, Sleep and Rand of a retry.Policy: sleeps are recorded
// and advance a fake clock, so a test asserts exact delays and never waits.
//
// Attempt timeouts run on real time, which FakeTime does not reach. For
// them, [NewMemoryServer] plays the same scripts over in-memory connections,
// so that a test inside a [testing/synctest] bubble, where time is virtual,
// sees a hanging server or a stalled body cut by the attempt timeout in
// milliseconds of real time.
//
// The package does not import the retry package, so it serves the tests of
// any retrying client.
package retrytest
