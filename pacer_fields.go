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
	if len(s) > 15 { // rare: strconv, behind the same check
		if len(s) > 32 || !plainDecimal(s) {
			return 0, false
		}
		f, err := strconv.ParseFloat(s, 64)
		return f, err == nil && f <= 1e15
	}
	// One pass, without strconv. Up to 15 digits fit a float64 exactly,
	// as does every power of ten a fraction of them can need, so the one
	// division below rounds as strconv.ParseFloat would.
	var n int64
	digits, dot := 0, -1
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			n = n*10 + int64(c-'0')
			digits++
		case c == '.' && dot < 0:
			dot = i
		default:
			return 0, false
		}
	}
	if digits == 0 {
		return 0, false
	}
	f := float64(n)
	if dot >= 0 {
		div := 1.0
		for range len(s) - 1 - dot {
			div *= 10
		}
		f /= div
	}
	return f, true
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
// what rate-limit fields use: a name (a string or a token) or a number,
// and the parameters the Pacer reads. Other parameters (pk) are skipped.
type sfItem struct {
	name       string // unquoted, escapes left as sent; "" for a number or a member that cannot be read
	num        float64
	isNum      bool
	q, w, r, t float64 // numeric parameters; 0 when absent or not a plain decimal
	hasR       bool    // r was sent: an r of 0 says that nothing is left
	qu         string  // the quota unit, unquoted; "" when absent
}

// head records the member's bare item: a number, or a name.
func (it *sfItem) head(v string) {
	if n, ok := parseNumber(v); ok {
		it.num, it.isNum = n, true
	} else {
		it.name = strings.Trim(v, `"`)
	}
}

// param records the parameter k=v. A key sent twice keeps its last value
// (RFC 9651, section 4.2.3.2).
func (it *sfItem) param(k, v string) {
	var dst *float64
	switch k {
	case "q":
		dst = &it.q
	case "w":
		dst = &it.w
	case "r":
		dst, it.hasR = &it.r, true
	case "t":
		dst = &it.t
	case "qu":
		it.qu = strings.Trim(v, `"`)
		return
	default:
		return
	}
	*dst, _ = parseNumber(v)
}

// sfList reads the members of a structured-field list, in order, in one
// pass that builds nothing. It is lenient where the fields' senders are
// (white space, missing quotes) and never fails: a member it cannot read
// comes with an empty name. At most 64 members are read.
type sfList struct {
	rest string
	read int
}

// sfSyntax has a bit for each byte below 64 that means something to
// sfList: '"', ',', ';' and '='. The other is '\\'.
const sfSyntax = 1<<'"' | 1<<',' | 1<<';' | 1<<'='

// next reads the next member into it, and reports whether there was one.
func (l *sfList) next(it *sfItem) bool {
	if l.rest == "" || l.read >= 64 {
		return false
	}
	l.read++
	*it = sfItem{}
	s := l.rest
	// One pass over the member. Its parts, the head and then each
	// parameter, end at a ';' or ',' outside a quoted string (RFC 9651,
	// section 3.3.3: a backslash escapes the next character); a ',' ends
	// the member too. eq is the first '=' of a part.
	start, eq, quoted, head := 0, -1, false, true
	for i := 0; i <= len(s); i++ {
		if i < len(s) {
			c := s[i]
			if c != '\\' && (c >= 64 || sfSyntax&(1<<c) == 0) {
				continue // most bytes: one test
			}
			switch {
			case c == '"':
				quoted = !quoted
				continue
			case c == '\\' && quoted:
				if i+1 < len(s) {
					i++
				}
				continue
			case c == '=' && eq < 0:
				eq = i
				continue
			case quoted || c != ';' && c != ',':
				continue
			}
		}
		switch {
		case head:
			it.head(strings.TrimSpace(s[start:i]))
			head = false
		case eq < 0:
			it.param(strings.TrimSpace(s[start:i]), "")
		default:
			it.param(strings.TrimSpace(s[start:eq]), strings.TrimSpace(s[eq+1:i]))
		}
		if i == len(s) || s[i] == ',' {
			l.rest = s[min(i+1, len(s)):]
			return true
		}
		start, eq = i+1, -1
	}
	return true // not reached: the loop ends at len(s)
}
