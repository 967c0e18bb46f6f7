// Package sfv reads HTTP structured fields (RFC 9651) strictly, in one
// pass that allocates nothing for the fields rate-limit servers send.
//
// A [Scanner] reads a List, a Dictionary or an Item field member by
// member, following the parsing algorithms of RFC 9651, section 4.2, to
// the byte: a field they reject is reported by [Scanner.Err], so that a
// caller believes nothing of it.
package sfv

import "strconv"

// Error says why a field does not parse, and where.
type Error struct {
	Offset int    // the byte of the field where parsing stopped
	Reason string // what was wrong there
}

// Error returns "sfv: " followed by the reason and the offset.
func (e *Error) Error() string {
	return "sfv: " + e.Reason + " at offset " + strconv.Itoa(e.Offset)
}

// mode is the type of field a Scanner reads.
type mode uint8

const (
	modeList mode = iota
	modeDict
	modeItem
)

// phase is what the bytes from Scanner.i on hold.
type phase uint8

const (
	phaseDone   phase = iota // nothing more: the end of the field, or an error
	phaseStart               // the first member, or none
	phaseItems               // the items of an inner list, from the next one to its ')'
	phaseParams              // the parameters of an item or an inner list
	phaseSep                 // what follows a member: white space, then a ',' or the end
)

// A Scanner reads the members of a structured field in one pass, in
// order. Start it with [Scanner.List], [Scanner.Dict] or [Scanner.Single],
// then call [Scanner.Next] until it returns false, and check
// [Scanner.Err]: a field that does not parse may have shown members
// before its error, and none of them may be believed.
//
//	var s sfv.Scanner
//	for s.List(field); s.Next(); {
//		it := s.Item()
//		for s.NextParam() {
//			k, v := s.Param()
//			...
//		}
//	}
//	if s.Err() != nil { ... }
//
// A field sent on several lines is one field: the caller joins its lines
// with "," before scanning (RFC 9651, section 4.2; RFC 9110, section 5.3).
//
// Keys are reported as they come, duplicates included. RFC 9651 says that
// a later parameter or dictionary member with the same key replaces the
// earlier one's value (sections 4.2.2 and 4.2.3.2): a caller that keeps
// the last value it saw for each key does that.
//
// A caller may leave parameters and inner items unread: Next, NextInner
// and NextParam move past them, checking them as they go, so a field that
// does not parse is reported whatever the caller reads.
//
// The zero Scanner has no field: Next reports false. A Scanner may be
// started again on another field. It is not safe for simultaneous use by
// multiple goroutines.
type Scanner struct {
	s     string // the field
	i     int    // the offset in s of the next byte to read
	mode  mode
	phase phase
	inner bool // the member is an inner list
	// within is true between an inner list's '(' and ')': the parameters
	// read are an inner item's, and a space or ')' must follow them.
	within bool

	key    string // the member's key, for a Dictionary
	item   Item   // the member's bare item, or None for an inner list
	inItem Item   // the inner list's current item
	pkey   string // the current parameter's key
	pval   Item   // the current parameter's value

	reason string // why the field does not parse; "" while it does
	off    int    // where it stopped parsing
}

// List starts reading field as a List (RFC 9651, section 3.1). An empty
// field, or one of spaces, is a List with no members.
func (s *Scanner) List(field string) { s.start(field, modeList) }

// Dict starts reading field as a Dictionary (RFC 9651, section 3.2). An
// empty field, or one of spaces, is a Dictionary with no members.
func (s *Scanner) Dict(field string) { s.start(field, modeDict) }

// Single starts reading field as an Item (RFC 9651, section 3.3): Next
// reports it as the field's one member, and an empty field does not parse.
func (s *Scanner) Single(field string) { s.start(field, modeItem) }

// start starts reading field as a field of type m.
func (s *Scanner) start(field string, m mode) {
	*s = Scanner{s: field, mode: m, phase: phaseStart}
	// Section 4.2, step 2: spaces, but not tabs, may lead a field.
	s.spaces()
}

// Next moves to the next member, past any of the current one's parameters
// and inner items left unread, and reports whether there is one. It
// returns false at the end of the field and at the first error, which Err
// then reports.
func (s *Scanner) Next() bool {
	s.skip()
	switch s.phase {
	case phaseStart:
		if s.i == len(s.s) {
			if s.mode == modeItem {
				return s.fail("an empty item")
			}
			s.phase = phaseDone
			return false
		}
	case phaseSep:
		if !s.sep() {
			return false
		}
	default:
		return false
	}
	return s.member()
}

// Key returns the member's key: a substring of the field, for a
// Dictionary; "" for a List or an Item.
func (s *Scanner) Key() string { return s.key }

// Inner reports whether the member is an inner list, whose items
// NextInner reads.
func (s *Scanner) Inner() bool { return s.inner }

// Item returns the member's bare item: for a Dictionary member sent as a
// key alone, the Boolean true (RFC 9651, section 3.2). It is the zero
// Item for an inner list.
func (s *Scanner) Item() Item { return s.item }

// NextInner moves to the next item of the member's inner list, past any
// of the current item's parameters left unread, and reports whether there
// is one. After the last item, NextParam reads the inner list's own
// parameters. It returns false at once for a member that is no inner
// list.
func (s *Scanner) NextInner() bool {
	if s.phase == phaseParams && s.within {
		for s.NextParam() {
		}
	}
	if s.phase != phaseItems {
		return false
	}
	s.spaces()
	switch {
	case s.i == len(s.s):
		return s.fail("an inner list without its ')'")
	case s.s[s.i] == ')':
		s.i++
		s.within = false
		s.inItem = Item{}
		s.phase = phaseParams
		return false
	}
	if !s.bare(&s.inItem) {
		return false
	}
	s.phase = phaseParams
	return true
}

// InnerItem returns the bare item of the inner list's current item.
func (s *Scanner) InnerItem() Item { return s.inItem }

// NextParam moves to the next parameter and reports whether there is one.
// The parameters are the member's, or those of the inner list's current
// item after NextInner reported it; called on an inner list before its
// items are all read, NextParam moves past them to the inner list's own
// parameters.
func (s *Scanner) NextParam() bool {
	if s.phase == phaseItems {
		for s.NextInner() {
		}
	}
	if s.phase != phaseParams {
		return false
	}
	if s.i == len(s.s) || s.s[s.i] != ';' {
		s.endParams()
		return false
	}
	s.i++
	s.spaces() // section 4.2.3.2: spaces may follow the ';'
	k, ok := s.readKey()
	if !ok {
		return false
	}
	s.pkey = k
	if s.i == len(s.s) || s.s[s.i] != '=' {
		s.pval = Item{Kind: Boolean, Bool: true}
		return true
	}
	s.i++
	return s.bare(&s.pval)
}

// Param returns the current parameter's key, a substring of the field,
// and its value: the Boolean true for a key sent alone.
func (s *Scanner) Param() (string, Item) { return s.pkey, s.pval }

// Err returns nil while the field parses, or an [*Error] that says why it
// does not. Only once Next has returned false does nil mean that the
// whole field parses.
func (s *Scanner) Err() error {
	if s.reason == "" {
		return nil
	}
	return &Error{Offset: s.off, Reason: s.reason}
}

// fail records why the field does not parse, ends the scan, and returns
// false, for its callers to return.
func (s *Scanner) fail(reason string) bool {
	s.reason, s.off, s.phase = reason, s.i, phaseDone
	return false
}

// spaces moves past spaces (SP, not tabs).
func (s *Scanner) spaces() {
	for s.i < len(s.s) && s.s[s.i] == ' ' {
		s.i++
	}
}

// ows moves past optional white space: spaces and tabs.
func (s *Scanner) ows() {
	for s.i < len(s.s) && (s.s[s.i] == ' ' || s.s[s.i] == '\t') {
		s.i++
	}
}

// skip moves past what is left of the current member, checking it.
func (s *Scanner) skip() {
	for {
		switch s.phase {
		case phaseItems:
			for s.NextInner() {
			}
		case phaseParams:
			for s.NextParam() {
			}
		default:
			return
		}
	}
}

// endParams moves on from parameters that have ended.
func (s *Scanner) endParams() {
	if !s.within {
		s.phase = phaseSep
		return
	}
	// Section 4.2.1.2: an inner item is followed by a space or the ')'.
	switch {
	case s.i == len(s.s):
		s.fail("an inner list without its ')'")
	case s.s[s.i] == ' ' || s.s[s.i] == ')':
		s.phase = phaseItems
	default:
		s.fail("expected a space or ')' after an inner list's item")
	}
}

// sep moves past what separates two members, and reports whether another
// member follows.
func (s *Scanner) sep() bool {
	if s.mode == modeItem {
		// Section 4.2, step 6: spaces may end the field.
		if s.spaces(); s.i < len(s.s) {
			return s.fail("more after the item")
		}
		s.phase = phaseDone
		return false
	}
	// Sections 4.2.1 and 4.2.2: white space, then a ',' and white space
	// before another member, or the end.
	if s.ows(); s.i == len(s.s) {
		s.phase = phaseDone
		return false
	}
	if s.s[s.i] != ',' {
		return s.fail("expected a ',' between members")
	}
	s.i++
	if s.ows(); s.i == len(s.s) {
		return s.fail("a trailing ','")
	}
	return true
}

// member reads a member up to its parameters or its inner items.
func (s *Scanner) member() bool {
	s.key, s.inner, s.within = "", false, false
	if s.mode == modeDict {
		k, ok := s.readKey()
		if !ok {
			return false
		}
		s.key = k
		if s.i == len(s.s) || s.s[s.i] != '=' {
			s.item = Item{Kind: Boolean, Bool: true}
			s.phase = phaseParams
			return true
		}
		s.i++
	}
	if s.mode != modeItem && s.i < len(s.s) && s.s[s.i] == '(' {
		s.i++
		s.inner, s.within = true, true
		s.item, s.inItem = Item{}, Item{}
		s.phase = phaseItems
		return true
	}
	if !s.bare(&s.item) {
		return false
	}
	s.phase = phaseParams
	return true
}
