package sfvdiff

import (
	"encoding/base64"
	"fmt"
	"strings"
	"time"
	"unsafe"

	"github.com/dunglas/httpsfv"
	"github.com/retrykit/retry/internal/sfv"
)

// One model of a parsed field for both readers, with RFC 9651's rule for
// keys sent twice applied (sections 4.2.2 and 4.2.3.2): the later value
// replaces the earlier one, in the earlier one's place, as httpsfv's
// ordered maps do.

// value is a bare item.
type value struct {
	Kind string // sfv.Kind's names
	Int  int64  // an Integer or a Date
	Dec  float64
	Str  string // a String, Token or Display String; a Byte Sequence's bytes
	Bool bool
}

// param is one parameter.
type param struct {
	Key string
	Val value
}

// item is a bare item and its parameters.
type item struct {
	Val    value
	Params []param
}

// member is one member of a field: an item, or an inner list.
type member struct {
	Key    string // for a Dictionary
	Inner  bool
	Item   item    // unless Inner
	Items  []item  // if Inner
	Params []param // the inner list's, if Inner
}

// setParam adds p to ps, or replaces the value of the parameter with its key.
func setParam(ps []param, p param) []param {
	for i := range ps {
		if ps[i].Key == p.Key {
			ps[i].Val = p.Val
			return ps
		}
	}
	return append(ps, p)
}

// readSFV reads field, of type typ ("list", "dictionary" or "item"), with
// the library's Scanner. padded is field with the '=' padding of every
// Byte Sequence sent without it put back (see check).
func readSFV(typ, field string) (ms []member, padded string, err error) {
	padded = field
	added := 0 // bytes of padding put into padded so far
	var s sfv.Scanner
	switch typ {
	case "list":
		s.List(field)
	case "dictionary":
		s.Dict(field)
	default:
		s.Single(field)
	}
	conv := func(it sfv.Item) value {
		v := value{Kind: it.Kind.String(), Int: it.Int, Dec: it.Dec, Str: it.Str, Bool: it.Bool}
		if it.Kind == sfv.ByteSeq {
			if n := len(it.Str) % 4; n != 0 {
				// A Byte Sequence's text is a substring of the field:
				// where it ends in field is where its padding goes.
				end := int(uintptr(unsafe.Pointer(unsafe.StringData(it.Str)))-
					uintptr(unsafe.Pointer(unsafe.StringData(field)))) + len(it.Str) + added
				pad := "==="[:4-n] // n is 1 only from a wrong Scanner: let httpsfv say so
				padded = padded[:end] + pad + padded[end:]
				added += len(pad)
			}
			b, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(it.Str, "="))
			if err != nil {
				v.Str = "undecodable: " + it.Str
			} else {
				v.Str = string(b)
			}
		}
		return v
	}
	params := func() []param {
		var ps []param
		for s.NextParam() {
			k, v := s.Param()
			ps = setParam(ps, param{Key: k, Val: conv(v)})
		}
		return ps
	}
	for s.Next() {
		m := member{Key: s.Key(), Inner: s.Inner()}
		if m.Inner {
			m.Items = []item{}
			for s.NextInner() {
				it := item{Val: conv(s.InnerItem())}
				it.Params = params()
				m.Items = append(m.Items, it)
			}
			m.Params = params()
		} else {
			m.Item = item{Val: conv(s.Item())}
			m.Item.Params = params()
		}
		replaced := false
		for i := range ms {
			if typ == "dictionary" && ms[i].Key == m.Key {
				ms[i], replaced = m, true
				break
			}
		}
		if !replaced {
			ms = append(ms, m)
		}
	}
	return ms, padded, s.Err()
}

// readHTTPSFV reads field, of type typ, with httpsfv.
func readHTTPSFV(typ, field string) ([]member, error) {
	lines := []string{field} // one line: the caller has joined them
	switch typ {
	case "list":
		l, err := httpsfv.UnmarshalList(lines)
		if err != nil {
			return nil, err
		}
		var ms []member
		for _, m := range l {
			cm, err := fromMember(m)
			if err != nil {
				return nil, err
			}
			ms = append(ms, cm)
		}
		return ms, nil
	case "dictionary":
		d, err := httpsfv.UnmarshalDictionary(lines)
		if err != nil {
			return nil, err
		}
		var ms []member
		for _, k := range d.Names() {
			m, _ := d.Get(k)
			cm, err := fromMember(m)
			if err != nil {
				return nil, err
			}
			cm.Key = k
			ms = append(ms, cm)
		}
		return ms, nil
	}
	it, err := httpsfv.UnmarshalItem(lines)
	if err != nil {
		return nil, err
	}
	ci, err := fromItem(it)
	return []member{{Item: ci}}, err
}

// fromMember converts an httpsfv Item or InnerList.
func fromMember(m httpsfv.Member) (member, error) {
	switch m := m.(type) {
	case httpsfv.Item:
		it, err := fromItem(m)
		return member{Item: it}, err
	case httpsfv.InnerList:
		cm := member{Inner: true, Items: []item{}}
		for _, it := range m.Items {
			ci, err := fromItem(it)
			if err != nil {
				return member{}, err
			}
			cm.Items = append(cm.Items, ci)
		}
		ps, err := fromParams(m.Params)
		cm.Params = ps
		return cm, err
	}
	return member{}, fmt.Errorf("unknown member %T", m)
}

// fromItem converts an httpsfv Item.
func fromItem(it httpsfv.Item) (item, error) {
	v, err := fromBare(it.Value)
	if err != nil {
		return item{}, err
	}
	ps, err := fromParams(it.Params)
	return item{Val: v, Params: ps}, err
}

// fromParams converts httpsfv Params.
func fromParams(p *httpsfv.Params) ([]param, error) {
	if p == nil {
		return nil, nil
	}
	var ps []param
	for _, k := range p.Names() {
		x, _ := p.Get(k)
		v, err := fromBare(x)
		if err != nil {
			return nil, err
		}
		ps = append(ps, param{Key: k, Val: v})
	}
	return ps, nil
}

// fromBare converts an httpsfv bare item.
func fromBare(x any) (value, error) {
	switch x := x.(type) {
	case int64:
		return value{Kind: sfv.Integer.String(), Int: x}, nil
	case float64:
		return value{Kind: sfv.Decimal.String(), Dec: x}, nil
	case string:
		return value{Kind: sfv.String.String(), Str: x}, nil
	case httpsfv.Token:
		return value{Kind: sfv.Token.String(), Str: string(x)}, nil
	case []byte:
		return value{Kind: sfv.ByteSeq.String(), Str: string(x)}, nil
	case bool:
		return value{Kind: sfv.Boolean.String(), Bool: x}, nil
	case time.Time:
		return value{Kind: sfv.Date.String(), Int: x.Unix()}, nil
	case httpsfv.DisplayString:
		return value{Kind: sfv.DisplayString.String(), Str: string(x)}, nil
	}
	return value{}, fmt.Errorf("unknown bare item %T", x)
}
