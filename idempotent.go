package retry

import "net/http"

// Idempotent reports whether req may be sent again after a failure the
// server may have processed, such as a timeout, a dropped connection or a
// 5xx: its method is idempotent (GET, HEAD, OPTIONS, TRACE, PUT or DELETE;
// RFC 9110, section 9.2.2; an empty method means GET), or it carries an
// Idempotency-Key or X-Idempotency-Key header. A key present with a nil
// value counts: net/http's convention for "idempotent, but send no key".
//
// It is the Transport's rule when Transport.Replayable is nil. A Replayable
// that knows more about one API can defer to it for the rest: some writes
// are not idempotent in practice though their method says so. Idempotent
// reads req only; a nil req is not idempotent.
func Idempotent(req *http.Request) bool {
	if req == nil {
		return false
	}
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace,
		http.MethodPut, http.MethodDelete:
		return true
	}
	return hasKey(req.Header)
}
