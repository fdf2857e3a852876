package server

import "strings"

// erlPretty prints a term as io_lib:format("~p") does at column col
// (1-based): on one line when it fits in 80 columns, else broken as
// io_lib_pretty breaks it. This follows io_lib_pretty (OTP 25) for the
// terms a JSON value becomes: flat atoms, numbers and printable binaries;
// lists, untagged tuples and maps laid out over lines, simple elements
// filled onto a line, a map pair that does not fit written "K =>" with its
// value indented four more.
func erlPretty(t any, col int) string {
	n := ppNodeOf(t)
	if n.n < ppLineLength-col {
		return n.write()
	}
	p := prettyPrinter{max: n.n}
	return p.pp(n, col, strings.Repeat(" ", col-1), 0, 0)
}

// erlMsgAt formats prefix followed by v printed with ~p where the prefix
// leaves the column.
func erlMsgAt(prefix string, v any) string {
	col := len(prefix) - strings.LastIndexByte(prefix, '\n')
	return prefix + erlPretty(v, col)
}

const ppLineLength = 80

const (
	ppFlat = iota // an atom, number, printable binary, [] or #{}
	ppBin         // a binary printed as bytes
	ppList
	ppTuple
	ppMap
	ppPair // a map's K => V
)

// ppNode is io_lib_pretty's intermediate form: a term with its flat length.
type ppNode struct {
	kind     int
	flat     string    // ppFlat, ppBin
	elems    []*ppNode // ppList, ppTuple, ppMap (pairs)
	key, val *ppNode   // ppPair
	n        int       // the flat length
}

func ppNodeOf(t any) *ppNode {
	seq := func(kind, overhead int, items []*ppNode) *ppNode {
		n := overhead + len(items) - 1
		for _, e := range items {
			n += e.n
		}
		return &ppNode{kind: kind, elems: items, n: n}
	}
	switch t := t.(type) {
	case termList:
		if len(t) == 0 {
			return &ppNode{kind: ppFlat, flat: "[]", n: 2}
		}
		return seq(ppList, 2, ppNodesOf(t))
	case termTuple:
		if len(t) == 0 {
			return &ppNode{kind: ppFlat, flat: "{}", n: 2}
		}
		return seq(ppTuple, 2, ppNodesOf(t))
	case termMap:
		if len(t) == 0 {
			return &ppNode{kind: ppFlat, flat: "#{}", n: 3}
		}
		pairs := make([]*ppNode, len(t))
		for i, p := range t {
			k, v := ppNodeOf(p.key), ppNodeOf(p.value)
			pairs[i] = &ppNode{kind: ppPair, key: k, val: v, n: k.n + 4 + v.n}
		}
		return seq(ppMap, 3, pairs)
	}
	s := erlFormat(t)
	kind := ppFlat
	if b, ok := t.(termBin); ok && b != "" && !strings.HasPrefix(s, `<<"`) {
		kind = ppBin
	}
	return &ppNode{kind: kind, flat: s, n: len(s)}
}

func ppNodesOf(items []any) []*ppNode {
	out := make([]*ppNode, len(items))
	for i, e := range items {
		out[i] = ppNodeOf(e)
	}
	return out
}

// simple is io_lib_pretty's is_list(element(1, E)): a flat element may
// share a line with its neighbours.
func (n *ppNode) simple() bool {
	if n.kind == ppPair {
		return n.key.kind == ppFlat && n.val.kind == ppFlat
	}
	return n.kind == ppFlat
}

func (n *ppNode) write() string {
	var b strings.Builder
	n.writeTo(&b)
	return b.String()
}

func (n *ppNode) writeTo(b *strings.Builder) {
	switch n.kind {
	case ppFlat, ppBin:
		b.WriteString(n.flat)
	case ppPair:
		n.key.writeTo(b)
		b.WriteString(" => ")
		n.val.writeTo(b)
	case ppList:
		writeNodes(b, "[", n.elems, "]")
	case ppTuple:
		writeNodes(b, "{", n.elems, "}")
	case ppMap:
		writeNodes(b, "#{", n.elems, "}")
	}
}

func writeNodes(b *strings.Builder, open string, es []*ppNode, end string) {
	b.WriteString(open)
	for i, e := range es {
		if i > 0 {
			b.WriteByte(',')
		}
		e.writeTo(b)
	}
	b.WriteString(end)
}

// prettyPrinter holds io_lib_pretty's M, the most characters a line may
// take: the term's flat length, as ~p sets no chars_limit.
type prettyPrinter struct{ max int }

// lastDepth is io_lib_pretty's last_depth: how many closing brackets
// follow the last element.
func lastDepth(rest []*ppNode, ld int) int {
	if len(rest) > 0 {
		return 0
	}
	return ld + 1
}

// fits says whether n goes on the current line at col with w written.
func (p prettyPrinter) fits(n *ppNode, col, ld, w int) bool {
	return n.n < ppLineLength-col-ld && n.n+w+ld <= p.max
}

func (p prettyPrinter) pp(n *ppNode, col int, ind string, ld, w int) string {
	if p.fits(n, col, ld, w) {
		return n.write()
	}
	switch n.kind {
	case ppList:
		return "[" + p.list(n.elems, col+1, ind+" ", ld, w+1) + "]"
	case ppTuple:
		return "{" + p.list(n.elems, col+1, ind+" ", ld, w+1) + "}"
	case ppMap:
		return "#{" + p.pairs(n.elems, col+2, ind+"  ", ld, w+1) + "}"
	}
	return n.write()
}

// list is pp_list with pp_tail: elements filled onto lines while simple
// ones fit, each other one on a line of its own.
func (p prettyPrinter) list(es []*ppNode, col0 int, ind string, ld, w int) string {
	s, we := p.element(es[0], col0, ind, lastDepth(es[1:], ld), w)
	var b strings.Builder
	b.WriteString(s)
	col, w := col0+we, w+we
	for i := 1; i < len(es); i++ {
		e, ld1 := es[i], lastDepth(es[i+1:], ld)
		if p.fillable(e, col, ld1, w) {
			b.WriteString("," + e.write())
			col, w = col+1+e.n, w+1+e.n
			continue
		}
		s, we := p.element(e, col0, ind, ld1, 0)
		b.WriteString(",\n" + ind + s)
		col, w = col0+we, we
	}
	return b.String()
}

// fillable is pp_tail's test for writing the next element on this line.
func (p prettyPrinter) fillable(e *ppNode, col, ld1, w int) bool {
	eLen := 1 + e.n
	if !e.simple() {
		return false
	}
	if ld1 == 0 {
		return eLen+1 < ppLineLength-col && w+eLen+1 <= p.max
	}
	return eLen < ppLineLength-col-ld1 && w+eLen+ld1 <= p.max
}

// element is pp_element: the text and the width it takes (the whole line
// when it is not simple, so nothing follows it there).
func (p prettyPrinter) element(e *ppNode, col int, ind string, ld, w int) (string, int) {
	if p.fits(e, col, ld, w) && e.simple() {
		return e.write(), e.n
	}
	return p.pp(e, col, ind, ld, w), ppLineLength
}

// pairs is pp_map with pp_pairs_tail.
func (p prettyPrinter) pairs(ps []*ppNode, col0 int, ind string, ld, w int) string {
	s, pw := p.pair(ps[0], col0, ind, lastDepth(ps[1:], ld), w)
	var b strings.Builder
	b.WriteString(s)
	col, w := col0+pw, pw
	for i := 1; i < len(ps); i++ {
		e, ld1 := ps[i], lastDepth(ps[i+1:], ld)
		if p.fillable(e, col, ld1, w) {
			b.WriteString("," + e.write())
			col, w = col+1+e.n, w+1+e.n
			continue
		}
		s, pw := p.pair(e, col0, ind, ld1, 0)
		b.WriteString(",\n" + ind + s)
		col, w = col0+pw, pw
	}
	return b.String()
}

// pair is pp_pair: K => V on the line when it fits, else the value on the
// next line, indented four more than the key.
func (p prettyPrinter) pair(e *ppNode, col int, ind string, ld, w int) (string, int) {
	if p.fits(e, col, ld, w) {
		if e.simple() {
			return e.write(), e.n
		}
		return e.write(), ppLineLength
	}
	ind2 := ind + "    "
	return p.pp(e.key, col, ind, ld, w) + " =>\n" + ind2 + p.pp(e.val, col+4, ind2, ld, 0), ppLineLength
}
