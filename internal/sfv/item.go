package sfv

import "strconv"

// Kind is the type of a bare item (RFC 9651, section 3.3). The zero Kind,
// None, is no item: what [Scanner.Item] returns for an inner list.
type Kind uint8

// The kinds of bare item.
const (
	None          Kind = iota // no item
	Integer                   // Item.Int
	Decimal                   // Item.Dec
	String                    // Item.Str, unescaped
	Token                     // Item.Str
	ByteSeq                   // Item.Str, the base64 text as sent
	Boolean                   // Item.Bool
	Date                      // Item.Int, seconds since the Unix epoch
	DisplayString             // Item.Str, decoded UTF-8
)

// String returns the kind's name in lower case: "integer", "token", and so
// on; "none" for None.
func (k Kind) String() string {
	switch k {
	case None:
		return "none"
	case Integer:
		return "integer"
	case Decimal:
		return "decimal"
	case String:
		return "string"
	case Token:
		return "token"
	case ByteSeq:
		return "byteseq"
	case Boolean:
		return "boolean"
	case Date:
		return "date"
	case DisplayString:
		return "displaystring"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Item is a bare item: an Integer, Decimal, String, Token, Byte Sequence,
// Boolean, Date or Display String. Kind says which field holds its value;
// the others are zero. The zero Item is no item (Kind None).
//
// Str is a substring of the field, without a copy, for a Token, a Byte
// Sequence, and a String or Display String that has no escapes; an
// escaped String or a percent-encoded Display String is a new string.
type Item struct {
	Kind Kind
	Bool bool    // a Boolean; beside Kind, so that an Item is 40 bytes, not 48
	Int  int64   // an Integer or a Date
	Dec  float64 // a Decimal
	Str  string  // a String (unescaped), Token, Display String (decoded UTF-8), or Byte Sequence (its base64 text as sent)
}

// Number returns an Integer's or a Decimal's value as a float64, exactly
// (both have at most 15 significant digits), and false for any other kind.
func (it Item) Number() (float64, bool) {
	switch it.Kind {
	case Integer:
		return float64(it.Int), true
	case Decimal:
		return it.Dec, true
	}
	return 0, false
}
