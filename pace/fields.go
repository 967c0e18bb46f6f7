package pace

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/retrykit/retry/internal/sfv"
	"github.com/retrykit/retry/internal/wire"
)

// The field syntaxes the rate-limit parsers share: counts and dates, read
// leniently and without allocating, and the members of the structured
// fields of RFC 9651, read strictly (package sfv): a structured field that
// does not parse is not believed at all.

// headerCount reads a header holding a non-negative decimal number. Signs,
// exponents, "Inf" and "NaN" are refused.
func headerCount(h http.Header, k string) (float64, bool) {
	return firstCount(h[k])
}

// firstCount is headerCount given the header's values.
func firstCount(vs []string) (float64, bool) {
	if len(vs) == 0 {
		return 0, false
	}
	return parseNumber(strings.TrimSpace(vs[0]))
}

// parseNumber reads digits with at most one decimal point, as parseDecimal
// does, up to 1e15: larger counts are no limit any server keeps.
func parseNumber(s string) (float64, bool) {
	if len(s) > 15 { // rare: strconv, behind the same check
		if len(s) > 32 || !wire.PlainDecimal(s) {
			return 0, false
		}
		f, err := strconv.ParseFloat(s, 64)
		return f, err == nil && f <= 1e15
	}
	// One pass, without strconv. Up to 15 digits fit a float64 exactly,
	// as does every power of ten a fraction of them can need, so the one
	// division below rounds as strconv.ParseFloat would.
	var n int64
	i := 0
	for ; i < len(s) && s[i]-'0' < 10; i++ {
		n = n*10 + int64(s[i]-'0')
	}
	if i == len(s) { // digits only, the common case
		return float64(n), i > 0
	}
	if s[i] != '.' {
		return 0, false
	}
	dot := i
	for i++; i < len(s) && s[i]-'0' < 10; i++ {
		n = n*10 + int64(s[i]-'0')
	}
	if i < len(s) || len(s) == 1 {
		return 0, false // another byte, or a lone "."
	}
	div := 1.0
	for range len(s) - 1 - dot {
		div *= 10
	}
	return float64(n) / div, true
}

// responseDate returns the response's Date, or now when it has none.
func responseDate(h http.Header, now time.Time) time.Time {
	v, ok := wire.HeaderValue(h, "Date")
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
	day, year, hh, mm, ss := digitsValue(v[5:7]), digitsValue(v[12:16]), digitsValue(v[17:19]), digitsValue(v[20:22]), digitsValue(v[23:25])
	month := strings.Index(imfMonths, v[8:11])
	if day < 1 || day > 31 || year < 0 || hh < 0 || hh > 23 || mm < 0 || mm > 59 || ss < 0 || ss > 60 ||
		month < 0 || month%3 != 0 {
		return time.Time{}, false
	}
	return unixUTC(year, month/3+1, day, hh, mm, ss), true
}

// parseRFC3339 is time.Parse(time.RFC3339Nano, v) without its cost for
// the form servers send, "2026-01-01T00:00:01Z"; other forms, and days
// past the 28th, which need the month's length, are left to time.Parse.
func parseRFC3339(v string) (time.Time, error) {
	if len(v) == 20 && v[4] == '-' && v[7] == '-' && v[10] == 'T' && v[13] == ':' && v[16] == ':' && v[19] == 'Z' {
		year, month, day := digitsValue(v[0:4]), digitsValue(v[5:7]), digitsValue(v[8:10])
		hh, mm, ss := digitsValue(v[11:13]), digitsValue(v[14:16]), digitsValue(v[17:19])
		if year >= 0 && month >= 1 && month <= 12 && day >= 1 && day <= 28 &&
			hh >= 0 && hh <= 23 && mm >= 0 && mm <= 59 && ss >= 0 && ss <= 59 {
			return unixUTC(year, month, day, hh, mm, ss), nil
		}
	}
	return time.Parse(time.RFC3339Nano, v)
}

// unixUTC is time.Date(year, month, day, hh, mm, ss, 0, time.UTC) for the
// fields a date parser checked (year 0 to 9999, month 1 to 12, day 1 to
// 31, a time of day up to 23:59:60), at about half its cost (14 against
// 24 ns here): an Anthropic response has three dates, a GitHub one has one.
// A day past the month's end, or a 60th second, rolls over as time.Date's
// does.
func unixUTC(year, month, day, hh, mm, ss int) time.Time {
	// Days since 0000-03-01 in the proleptic Gregorian calendar, the
	// year starting in March so that a leap day ends it: 400 years are
	// 146097 days, a year of the cycle 365 and its leap days, a month
	// 153 days per five from March on.
	y := year
	if month <= 2 {
		y--
	}
	era := (y + 400) / 400 // y >= -1: era 0 stands for years -400 to -1
	yoe := y + 400 - era*400
	doy := (153*((month+9)%12)+2)/5 + day - 1
	days := (era-1)*146097 + yoe*365 + yoe/4 - yoe/100 + doy - 719468 // 1970-01-01 is day 719468
	return time.Unix(int64(days)*86400+int64(hh*3600+mm*60+ss), 0).UTC()
}

// digitsValue returns the value of s, all decimal digits, or -1.
func digitsValue(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return -1
		}
		n = n*10 + int(s[i]-'0')
	}
	return n
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

// sfMember is a member of a structured-field list or dictionary, reduced
// to what rate-limit fields use: its key (a dictionary's), its bare item as
// a name (a string or a token) or a number, and the parameters the Pacer
// reads. Other parameters (pk) are skipped.
type sfMember struct {
	key        string
	name       string // "" for a number
	num        float64
	isNum      bool
	q, w, r, t float64 // numeric parameters; 0 when absent
	hasR, hasT bool    // r and t were sent: an r of 0 says that nothing is left
	qu         string  // the quota unit; "" when absent
	bad        bool    // a parameter the Pacer reads is not a number of zero or more
}

// readMember fills m from the scanner's current member. A parameter sent
// twice keeps its last value (RFC 9651, section 4.2.3.2).
func readMember(s *sfv.Scanner, m *sfMember) {
	*m = sfMember{key: s.Key()}
	if s.Inner() {
		m.bad = true
		return
	}
	switch it := s.Item(); it.Kind {
	case sfv.String, sfv.Token:
		m.name = it.Str
	default:
		m.num, m.isNum = it.Number()
	}
	for s.NextParam() {
		k, v := s.Param()
		var dst *float64
		switch k {
		case "q":
			dst = &m.q
		case "w":
			dst = &m.w
		case "r":
			dst, m.hasR = &m.r, true
		case "t":
			dst, m.hasT = &m.t, true
		case "qu":
			if v.Kind == sfv.String || v.Kind == sfv.Token {
				m.qu = v.Str
			} else {
				m.bad = true
			}
			continue
		default:
			continue
		}
		n, ok := v.Number()
		if !ok || n < 0 {
			m.bad = true
		}
		*dst = n
	}
}
