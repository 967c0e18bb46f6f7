package sfv

// The tests' model of a parsed field: what a caller that reads every
// member, inner item and parameter sees, in order, duplicates included.

// param is one parameter.
type param struct {
	Key string
	Val Item
}

// innerItem is one item of an inner list.
type innerItem struct {
	Item   Item
	Params []param
}

// member is one member of a field: an item, or an inner list.
type member struct {
	Key     string // for a Dictionary
	IsInner bool
	Item    Item        // unless IsInner
	Items   []innerItem // if IsInner
	Params  []param     // the item's, or the inner list's
}

// readAll reads every member of the field s was started on, and returns
// them with s.Err().
func readAll(s *Scanner) ([]member, error) {
	var ms []member
	for s.Next() {
		m := member{Key: s.Key(), IsInner: s.Inner(), Item: s.Item()}
		if m.IsInner {
			for s.NextInner() {
				ii := innerItem{Item: s.InnerItem()}
				ii.Params = readParams(s)
				m.Items = append(m.Items, ii)
			}
		}
		m.Params = readParams(s)
		ms = append(ms, m)
	}
	return ms, s.Err()
}

// readParams reads the parameters from s's current position.
func readParams(s *Scanner) []param {
	var ps []param
	for s.NextParam() {
		k, v := s.Param()
		ps = append(ps, param{Key: k, Val: v})
	}
	return ps
}

// dedupe applies RFC 9651's rule for keys sent twice (sections 4.2.2 and
// 4.2.3.2) to a Dictionary's members and to every set of parameters: the
// later value replaces the earlier one, in the earlier one's place.
func dedupe(ms []member, dict bool) []member {
	var out []member
	for _, m := range ms {
		m.Params = dedupeParams(m.Params)
		items := m.Items
		m.Items = nil
		for _, ii := range items {
			ii.Params = dedupeParams(ii.Params)
			m.Items = append(m.Items, ii)
		}
		if m.IsInner && m.Items == nil {
			m.Items = []innerItem{}
		}
		if dict {
			if j := indexKey(len(out), func(j int) string { return out[j].Key }, m.Key); j >= 0 {
				out[j] = m
				continue
			}
		}
		out = append(out, m)
	}
	return out
}

// dedupeParams is dedupe for one set of parameters.
func dedupeParams(ps []param) []param {
	var out []param
	for _, p := range ps {
		if j := indexKey(len(out), func(j int) string { return out[j].Key }, p.Key); j >= 0 {
			out[j] = p
			continue
		}
		out = append(out, p)
	}
	return out
}

// indexKey returns the first j below n with key(j) == k, or -1.
func indexKey(n int, key func(int) string, k string) int {
	for j := range n {
		if key(j) == k {
			return j
		}
	}
	return -1
}
