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
	if v != "" && v[0] == '"' { // a string, the common case: not a number
		it.name = strings.Trim(v, `"`)
	} else if n, ok := parseNumber(v); ok {
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

// sfSpecial0 (bytes 0 to 63) and sfSpecial1 (64 to 127) have a bit for
// each byte that sfList must look at: the syntax ('"', ',', ';', '=',
// '\\'), and white space and control bytes (up to ' ', and DEL), which may
// need trimming. Every byte from 128 on is looked at too: it may start a
// Unicode space. A table lookup tests a byte without a branch.
const (
	sfSpecial0 = 1<<'"' | 1<<',' | 1<<';' | 1<<'=' | (1<<'!' - 1)
	sfSpecial1 = 1<<('\\'-64) | 1<<(0x7f-64)
)

// next reads the next member into it, and reports whether there was one.
func (l *sfList) next(it *sfItem) bool {
	if l.rest == "" || l.read >= 64 {
		return false
	}
	l.read++
	*it = sfItem{}
	if rest, ok := it.readPlain(l.rest); ok {
		l.rest = rest
		return true
	}
	*it = sfItem{}
	l.rest = it.read(l.rest)
	return true
}

// readPlain reads the member that starts s, written as servers write
// them, and returns what follows it: a string without escapes, a token or
// a number; then parameters ";key=value" whose keys are lowercase letters
// and whose values are strings without escapes or runs of printable bytes
// without syntax; then spaces, and a ',' or the end. Anything else it
// leaves to read, reporting false. On what it accepts the two agree, but
// its loop over each run costs less than read's test of every byte.
func (it *sfItem) readPlain(s string) (string, bool) {
	i := skipSpaces(s, 0)
	j, ok := plainRun(s, i)
	if !ok || j == i {
		return "", false
	}
	it.head(s[i:j])
	for i = j; i < len(s) && s[i] == ';'; i = j {
		k := skipSpaces(s, i+1)
		e := k
		for e < len(s) && s[e] >= 'a' && s[e] <= 'z' {
			e++
		}
		if e == k || e == len(s) || s[e] != '=' {
			return "", false
		}
		if j, ok = plainRun(s, e+1); !ok {
			return "", false
		}
		it.param(s[k:e], s[e+1:j])
	}
	if i = skipSpaces(s, i); i == len(s) {
		return "", true
	}
	if s[i] != ',' {
		return "", false
	}
	return s[i+1:], true
}

// plainRun returns the end of the string, or of the run of printable
// bytes without syntax, that starts at s[i]; false for a string with an
// escape or without its end.
func plainRun(s string, i int) (int, bool) {
	if i < len(s) && s[i] == '"' {
		for j := i + 1; j < len(s); j++ {
			switch s[j] {
			case '"':
				return j + 1, true
			case '\\':
				return 0, false
			}
		}
		return 0, false
	}
	// A run stops where read would look, but for '=', which only the
	// first '=' of a part means anything to.
	stop := [4]uint64{sfSpecial0 &^ (1 << '='), sfSpecial1, ^uint64(0), ^uint64(0)}
	for i < len(s) && stop[s[i]>>6]>>(s[i]&63)&1 == 0 {
		i++
	}
	return i, true
}

// skipSpaces returns the index of the first byte of s from i on that is
// not a space or a tab.
func skipSpaces(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	return i
}

// read reads the member that starts s, whatever its syntax, and returns
// what follows it.
func (it *sfItem) read(s string) string {
	// One pass over the member. Its parts, the head and then each
	// parameter, end at a ';' or ',' outside a quoted string (RFC 9651,
	// section 3.3.3: a backslash escapes the next character); a ',' ends
	// the member too. eq is the first '=' of a part; space says that the
	// part may need trimming: it holds a byte below '!' or above '~'.
	start, eq, quoted, space, head := 0, -1, false, false, true
	special := [4]uint64{sfSpecial0, sfSpecial1, ^uint64(0), ^uint64(0)}
	for i := 0; i <= len(s); i++ {
		if i < len(s) {
			c := s[i]
			if special[c>>6]>>(c&63)&1 == 0 {
				continue // most bytes: one test, without branches
			}
			switch {
			case c == '"':
				quoted = !quoted
			case c == '\\' && quoted:
				if i+1 < len(s) {
					i++
				}
				space = true // the byte skipped may be one: trim to be sure
			case c == '=' && eq < 0:
				eq = i
			case c <= ' ' || c >= 0x7f:
				space = true
			}
			if quoted || c != ';' && c != ',' {
				continue
			}
		}
		k, v := s[start:i], ""
		if eq >= 0 && !head {
			k, v = s[start:eq], s[eq+1:i]
		}
		if space {
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		}
		if head {
			it.head(k)
			head = false
		} else {
			it.param(k, v)
		}
		if i == len(s) || s[i] == ',' {
			return s[min(i+1, len(s)):]
		}
		start, eq, space = i+1, -1, false
	}
	return "" // not reached: the loop ends at len(s)
}
