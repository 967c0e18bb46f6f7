package sfv

import (
	"strings"
	"unicode/utf8"
)

// The readers of bare items and keys, each following its algorithm in RFC
// 9651, section 4.2, from s.i on. Each sets *it and moves s.i past what it
// read, or fails the Scanner and reports false.

// Bit sets of the bytes below 64 (lo) and from 64 to 127 (hi) that may
// follow the first byte of a key (section 3.1.2), of a token (tchar, ':'
// and '/', section 3.3.4) and of base64 text (section 3.3.5, without '=').
// A test checks them against the RFC's grammar.
const (
	digits = (1<<10 - 1) << '0'
	alphas = (1<<26 - 1) << ('A' - 64)
	lowers = (1<<26 - 1) << ('a' - 64)

	keyLo = digits | 1<<'*' | 1<<'-' | 1<<'.'
	keyHi = lowers | 1<<('_'-64)

	tokenLo = digits | 1<<'!' | 1<<'#' | 1<<'$' | 1<<'%' | 1<<'&' | 1<<'\'' | 1<<'*' |
		1<<'+' | 1<<'-' | 1<<'.' | 1<<'/' | 1<<':'
	tokenHi = alphas | lowers | 1<<('^'-64) | 1<<('_'-64) | 1<<('`'-64) | 1<<('|'-64) | 1<<('~'-64)

	base64Lo = digits | 1<<'+' | 1<<'/'
	base64Hi = alphas | lowers
)

// in reports whether c is in the set lo, hi.
func in(lo, hi uint64, c byte) bool {
	if c < 64 {
		return lo>>c&1 != 0
	}
	return c < 128 && hi>>(c-64)&1 != 0
}

// isAlpha reports whether c is an ASCII letter.
func isAlpha(c byte) bool { return (c|0x20)-'a' < 26 }

// readKey reads a key (section 4.2.3.3).
func (s *Scanner) readKey() (string, bool) {
	i := s.i
	if i == len(s.s) || s.s[i]-'a' >= 26 && s.s[i] != '*' {
		return "", s.fail("expected a key: a lowercase letter or '*'")
	}
	for i++; i < len(s.s) && in(keyLo, keyHi, s.s[i]); i++ {
	}
	k := s.s[s.i:i]
	s.i = i
	return k, true
}

// bare reads a bare item (section 4.2.3.1).
func (s *Scanner) bare(it *Item) bool {
	if s.i == len(s.s) {
		return s.fail("expected an item")
	}
	switch c := s.s[s.i]; {
	case c == '"':
		return s.str(it)
	case c == '-' || c-'0' < 10:
		return s.number(it, Integer)
	case c == '*' || isAlpha(c):
		i := s.i + 1
		for i < len(s.s) && in(tokenLo, tokenHi, s.s[i]) {
			i++
		}
		*it = Item{Kind: Token, Str: s.s[s.i:i]}
		s.i = i
		return true
	case c == ':':
		return s.bytes(it)
	case c == '?':
		if s.i+1 < len(s.s) && s.s[s.i+1]-'0' < 2 {
			*it = Item{Kind: Boolean, Bool: s.s[s.i+1] == '1'}
			s.i += 2
			return true
		}
		s.i++
		return s.fail("expected ?0 or ?1")
	case c == '@':
		s.i++
		return s.number(it, Date)
	case c == '%':
		return s.display(it)
	}
	return s.fail("expected an item")
}

// number reads an Integer or a Decimal (section 4.2.4), or the Integer of
// a Date (section 4.2.9) when kind is Date.
func (s *Scanner) number(it *Item, kind Kind) bool {
	i := s.i
	neg := i < len(s.s) && s.s[i] == '-'
	if neg {
		i++
	}
	start := i
	var n int64
	for ; i < len(s.s) && s.s[i]-'0' < 10; i++ {
		if i-start == 15 {
			s.i = i
			return s.fail("more than 15 digits")
		}
		n = n*10 + int64(s.s[i]-'0')
	}
	if i == start {
		s.i = i
		return s.fail("expected a digit")
	}
	if i == len(s.s) || s.s[i] != '.' {
		if neg {
			n = -n
		}
		*it = Item{Kind: kind, Int: n}
		s.i = i
		return true
	}
	if kind == Date {
		s.i = i
		return s.fail("a date with a fraction")
	}
	if i-start > 12 {
		s.i = i
		return s.fail("more than 12 digits before a decimal point")
	}
	i++
	frac := i
	for ; i < len(s.s) && s.s[i]-'0' < 10; i++ {
		if i-frac == 3 {
			s.i = i
			return s.fail("more than 3 digits after a decimal point")
		}
		n = n*10 + int64(s.s[i]-'0')
	}
	if i == frac {
		s.i = i
		return s.fail("expected a digit after a decimal point")
	}
	// n has at most 15 digits, so float64(n) is exact and one division by
	// an exact power of ten rounds as strconv.ParseFloat would.
	d := float64(n) / [...]float64{1, 10, 100, 1000}[i-frac]
	if neg {
		d = -d
	}
	*it = Item{Kind: Decimal, Dec: d}
	s.i = i
	return true
}

// str reads a String (section 4.2.5). One without escapes is a substring
// of the field.
func (s *Scanner) str(it *Item) bool {
	for i := s.i + 1; i < len(s.s); i++ {
		c := s.s[i]
		if c-'#' < '~'-'#'+1 && c != '\\' {
			continue // most bytes: neither the end, an escape, nor invalid
		}
		switch {
		case c == '"':
			*it = Item{Kind: String, Str: s.s[s.i+1 : i]}
			s.i = i + 1
			return true
		case c == '\\':
			return s.escaped(it)
		case c < ' ' || c > '~':
			s.i = i
			return s.fail("a control or non-ASCII byte in a string")
		}
	}
	s.i = len(s.s)
	return s.fail("a string without its closing quote")
}

// escaped reads a String that has an escape: once to check it and find
// its length, then again to copy it.
func (s *Scanner) escaped(it *Item) bool {
	n, i := 0, s.i+1
	for ; ; i++ {
		if i == len(s.s) {
			s.i = i
			return s.fail("a string without its closing quote")
		}
		c := s.s[i]
		if c == '"' {
			break
		}
		if c == '\\' {
			i++
			if i == len(s.s) || s.s[i] != '"' && s.s[i] != '\\' {
				s.i = i
				return s.fail(`a string escape other than \" or \\`)
			}
		} else if c < ' ' || c > '~' {
			s.i = i
			return s.fail("a control or non-ASCII byte in a string")
		}
		n++
	}
	var b strings.Builder
	b.Grow(n)
	for j := s.i + 1; j < i; j++ {
		if s.s[j] == '\\' {
			j++
		}
		b.WriteByte(s.s[j])
	}
	*it = Item{Kind: String, Str: b.String()}
	s.i = i + 1
	return true
}

// bytes reads a Byte Sequence (section 4.2.7), checking that its base64
// text decodes without decoding it.
func (s *Scanner) bytes(it *Item) bool {
	start := s.i + 1
	i := start
	for i < len(s.s) && in(base64Lo, base64Hi, s.s[i]) {
		i++
	}
	data := i - start
	for i < len(s.s) && s.s[i] == '=' {
		i++
	}
	pad := i - start - data
	switch {
	case i == len(s.s):
		s.i = i
		return s.fail("a byte sequence without its closing ':'")
	case s.s[i] != ':':
		s.i = i
		return s.fail("a byte in a byte sequence that is not base64")
	case data%4 == 1:
		// No decoder can make a byte of six bits.
		s.i = i
		return s.fail("a byte sequence of a length base64 cannot have")
	case pad > 0 && (pad > 2 || (data+pad)%4 != 0):
		// Padding left out is synthesized, as section 4.2.7 says a
		// parser should, but padding sent must be the right padding.
		s.i = start + data
		return s.fail("a byte sequence with the wrong padding")
	}
	// Nonzero bits in the last sextet are accepted, as section 4.2.7 says
	// a parser should.
	*it = Item{Kind: ByteSeq, Str: s.s[start:i]}
	s.i = i + 1
	return true
}

// display reads a Display String (section 4.2.10). One without
// percent-encoding is a substring of the field.
func (s *Scanner) display(it *Item) bool {
	if s.i+1 >= len(s.s) || s.s[s.i+1] != '"' {
		s.i++
		return s.fail(`a display string that does not start with %"`)
	}
	start := s.i + 2
	encoded := false
	i := start
	for ; ; i++ {
		if i == len(s.s) {
			s.i = i
			return s.fail("a display string without its closing quote")
		}
		c := s.s[i]
		if c < ' ' || c > '~' {
			s.i = i
			return s.fail("a control or non-ASCII byte in a display string")
		}
		if c == '"' {
			break
		}
		if c == '%' {
			if i+2 >= len(s.s) || unhex(s.s[i+1]) < 0 || unhex(s.s[i+2]) < 0 {
				s.i = i
				return s.fail("a display string escape that is not % and two lowercase hex digits")
			}
			encoded = true
			i += 2
		}
	}
	str := s.s[start:i]
	if encoded {
		var b strings.Builder
		b.Grow(i - start)
		for j := start; j < i; j++ {
			c := s.s[j]
			if c == '%' {
				c = byte(unhex(s.s[j+1])<<4 | unhex(s.s[j+2]))
				j += 2
			}
			b.WriteByte(c)
		}
		if str = b.String(); !utf8.ValidString(str) {
			s.i = start
			return s.fail("a display string that is not UTF-8")
		}
	}
	*it = Item{Kind: DisplayString, Str: str}
	s.i = i + 1
	return true
}

// unhex returns the value of a lowercase hex digit, or -1.
func unhex(c byte) int {
	switch {
	case c-'0' < 10:
		return int(c - '0')
	case c-'a' < 6:
		return int(c-'a') + 10
	}
	return -1
}
