package retry

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The field syntaxes the rate-limit parsers share: counts, dates, and the
// structured-field lists of RFC 9651, each read leniently and without
// allocating.

// headerCount reads a header holding a non-negative decimal number. Signs,
// exponents, "Inf" and "NaN" are refused.
func headerCount(h http.Header, k string) (float64, bool) {
	v, ok := headerValue(h, k)
	if !ok {
		return 0, false
	}
	return parseNumber(v)
}

// parseNumber reads digits with at most one decimal point, as parseDecimal
// does, up to 1e15: larger counts are no limit any server keeps.
func parseNumber(s string) (float64, bool) {
	if len(s) > 32 || !plainDecimal(s) {
		return 0, false
	}
	if len(s) <= 15 && strings.IndexByte(s, '.') < 0 { // the common case, without strconv
		var n int64
		for i := 0; i < len(s); i++ {
			n = n*10 + int64(s[i]-'0')
		}
		return float64(n), true
	}
	f, err := strconv.ParseFloat(s, 64)
	return f, err == nil && f <= 1e15
}

// responseDate returns the response's Date, or now when it has none.
func responseDate(h http.Header, now time.Time) time.Time {
	v, ok := headerValue(h, "Date")
	if !ok || len(v) > 64 {
		return now
	}
	if t, ok := parseIMFFixdate(v); ok {
		return t
	}
	if t, err := http.ParseTime(v); err == nil {
		return t
	}
	return now
}

// imfMonths are the months of an IMF-fixdate, three letters each.
const imfMonths = "JanFebMarAprMayJunJulAugSepOctNovDec"

// parseIMFFixdate reads "Mon, 02 Jan 2006 15:04:05 GMT", the only form of
// date a server may send today (RFC 9110, section 5.6.7), without the cost
// of time.Parse; other forms are left to http.ParseTime.
func parseIMFFixdate(v string) (time.Time, bool) {
	if len(v) != 29 || v[3] != ',' || v[4] != ' ' || v[7] != ' ' || v[11] != ' ' || v[16] != ' ' ||
		v[19] != ':' || v[22] != ':' || v[25:] != " GMT" {
		return time.Time{}, false
	}
	num := func(s string) int {
		n := 0
		for i := 0; i < len(s); i++ {
			if s[i] < '0' || s[i] > '9' {
				return -1
			}
			n = n*10 + int(s[i]-'0')
		}
		return n
	}
	day, year, hh, mm, ss := num(v[5:7]), num(v[12:16]), num(v[17:19]), num(v[20:22]), num(v[23:25])
	month := strings.Index(imfMonths, v[8:11])
	if day < 1 || day > 31 || year < 0 || hh < 0 || hh > 23 || mm < 0 || mm > 59 || ss < 0 || ss > 60 ||
		month < 0 || month%3 != 0 {
		return time.Time{}, false
	}
	return time.Date(year, time.Month(month/3+1), day, hh, mm, ss, 0, time.UTC), true
}

// headerJoined returns all the values of k joined by commas, as a
// structured-field list may be split across lines (RFC 9651, section 3.1).
func headerJoined(h http.Header, k string) (string, bool) {
	vs := h[k]
	switch len(vs) {
	case 0:
		return "", false
	case 1:
		return vs[0], true
	}
	return strings.Join(vs, ","), true
}

// sfItem is one member of a structured-field list (RFC 9651), reduced to
// what rate-limit fields use: a name (a string or a token) or a number, and
// up to eight parameters, split once.
type sfItem struct {
	name  string
	num   float64
	isNum bool
	n     int
	keys  [8]string
	vals  [8]string
}

// param returns the numeric parameter k, or 0.
func (it *sfItem) param(k string) float64 {
	v, _ := it.rawParam(k)
	n, _ := parseNumber(v)
	return n
}

// strParam returns the string or token parameter k, unquoted, or "".
func (it *sfItem) strParam(k string) string {
	v, _ := it.rawParam(k)
	return strings.Trim(v, `"`)
}

func (it *sfItem) rawParam(k string) (string, bool) {
	for i := range it.n {
		if it.keys[i] == k {
			return it.vals[i], true
		}
	}
	return "", false
}

// sfList reads the members of a structured-field list, in order. It is
// lenient where the fields' senders are (white space, missing quotes) and
// never fails: a member it cannot read comes with an empty name. At most
// 64 members are read.
type sfList struct {
	rest string
	read int
}

// next reads the next member into it, and reports whether there was one.
func (l *sfList) next(it *sfItem) bool {
	if l.rest == "" || l.read >= 64 {
		return false
	}
	l.read++
	var m string
	m, l.rest, _ = cutOutsideQuotes(l.rest, ',')
	*it = sfItem{}
	head, params, more := cutOutsideQuotes(m, ';')
	head = strings.TrimSpace(head)
	if n, ok := parseNumber(head); ok {
		it.num, it.isNum = n, true
	} else {
		it.name = strings.Trim(head, `"`)
	}
	for more && it.n < len(it.keys) {
		var p string
		p, params, more = cutOutsideQuotes(params, ';')
		k, val, _ := strings.Cut(p, "=")
		it.keys[it.n], it.vals[it.n] = strings.TrimSpace(k), strings.TrimSpace(val)
		it.n++
	}
	return true
}

// cutOutsideQuotes is strings.Cut that skips sep inside a quoted string
// (RFC 9651, section 3.3.3: a backslash escapes the next character). A
// byte loop: the fields are short, and IndexByte's calls cost more here.
func cutOutsideQuotes(s string, sep byte) (before, after string, found bool) {
	quoted := false
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			quoted = !quoted
		case '\\':
			if quoted {
				i++
			}
		case sep:
			if !quoted {
				return s[:i], s[i+1:], true
			}
		}
	}
	return s, "", false
}
