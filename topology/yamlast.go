package topology

import (
	"reflect"
	"strconv"
	"unicode/utf8"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/token"
)

// This file holds the small helpers the decoder needs on top of
// goccy/go-yaml's AST: positions, anchors, and naming node kinds.

// isNil reports whether n is nil or a typed nil pointer, on which the AST's
// methods would panic.
func isNil(n ast.Node) bool {
	if n == nil {
		return true
	}
	v := reflect.ValueOf(n)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// posOf returns where n starts: a block mapping at its first key, a flow
// mapping at its "{", anything else at its first token.
func posOf(n ast.Node) pos {
	switch x := n.(type) {
	case *ast.MappingNode:
		if x != nil && !x.IsFlowStyle && len(x.Values) > 0 && x.Values[0] != nil {
			return posOf(x.Values[0].Key)
		}
		if x != nil {
			return tokenPos(x.Start)
		}
	case *ast.MappingValueNode:
		if x != nil {
			return posOf(x.Key)
		}
	case *ast.DocumentNode:
		if x != nil && !isNil(x.Body) {
			return posOf(x.Body)
		}
		if x != nil {
			return tokenPos(x.Start)
		}
	}
	if isNil(n) {
		return pos{1, 1}
	}
	return tokenPos(n.GetToken())
}

func tokenPos(tk *token.Token) pos {
	if tk == nil || tk.Position == nil {
		return pos{1, 1}
	}
	return pos{max(tk.Position.Line, 1), max(tk.Position.Column, 1)}
}

// mappingValues returns the entries of a mapping node; a lone
// MappingValueNode is a mapping of one entry.
func mappingValues(n ast.Node) ([]*ast.MappingValueNode, bool) {
	if isNil(n) {
		return nil, false
	}
	switch x := n.(type) {
	case *ast.MappingNode:
		return x.Values, true
	case *ast.MappingValueNode:
		return []*ast.MappingValueNode{x}, true
	}
	return nil, false
}

// scalarText returns the text of a scalar as written (without quotes), and
// false for collections, aliases and other non-scalars.
func scalarText(n ast.Node) (string, bool) {
	if isNil(n) {
		return "", false
	}
	switch x := n.(type) {
	case *ast.StringNode:
		return x.Value, true
	case *ast.LiteralNode:
		if isNil(x.Value) {
			return "", true
		}
		return x.Value.Value, true
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.InfinityNode, *ast.NanNode, *ast.NullNode:
		if tk := n.GetToken(); tk != nil {
			return tk.Value, true
		}
	}
	return "", false
}

// unwrap strips anchors and tags (which the decoder ignores) off n.
func unwrap(n ast.Node) ast.Node {
	for i := 0; i < 16 && !isNil(n); i++ {
		switch x := n.(type) {
		case *ast.AnchorNode:
			n = x.Value
		case *ast.TagNode:
			n = x.Value
		case *ast.MappingKeyNode:
			n = x.Value
		default:
			return n
		}
	}
	return n
}

// describe names a node's kind for "expected X, got Y" messages.
func describe(n ast.Node) string {
	if isNil(n) {
		return "nothing"
	}
	text, _ := scalarText(n)
	switch n.(type) {
	case *ast.StringNode, *ast.LiteralNode:
		return "a string (" + quoteShort(text) + ")"
	case *ast.IntegerNode:
		return "an integer (" + text + ")"
	case *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		return "a number (" + text + ")"
	case *ast.BoolNode:
		return "a boolean (" + text + ")"
	case *ast.NullNode:
		return "null"
	case *ast.SequenceNode:
		return "a list"
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.AliasNode:
		return "an alias"
	}
	return "a " + n.Type().String()
}

// quoteShort quotes s, cut to a length that fits in a message.
func quoteShort(s string) string {
	const limit = 40
	if utf8.RuneCountInString(s) > limit {
		s = string([]rune(s)[:limit]) + "…"
	}
	return strconv.Quote(s)
}

// anchorDef is one "&name" in the file.
type anchorDef struct {
	at    pos
	value ast.Node
}

// anchors maps an anchor name to its definitions in file order.
type anchors map[string][]anchorDef

// collectAnchors records every anchor under n. Nesting deeper than
// maxDepth is not searched: no topology is that deep, and aliases to such
// anchors are reported as unknown.
func (as anchors) collect(n ast.Node, depth int) {
	const maxDepth = 200
	if isNil(n) || depth > maxDepth {
		return
	}
	switch x := n.(type) {
	case *ast.AnchorNode:
		if name, ok := scalarText(x.Name); ok {
			as[name] = append(as[name], anchorDef{at: posOf(x), value: x.Value})
		}
		as.collect(x.Value, depth+1)
	case *ast.TagNode:
		as.collect(x.Value, depth+1)
	case *ast.MappingNode:
		for _, kv := range x.Values {
			as.collect(kv, depth+1)
		}
	case *ast.MappingValueNode:
		as.collect(x.Key, depth+1)
		as.collect(x.Value, depth+1)
	case *ast.MappingKeyNode:
		as.collect(x.Value, depth+1)
	case *ast.SequenceNode:
		for _, v := range x.Values {
			as.collect(v, depth+1)
		}
	}
}

// lookup returns the value of the last anchor named like alias a and
// defined before it (nil for an anchor on an empty value).
func (as anchors) lookup(a *ast.AliasNode) (value ast.Node, found bool) {
	name, ok := scalarText(a.Value)
	if !ok {
		return nil, false
	}
	at := posOf(a)
	for _, def := range as[name] {
		if def.at.before(at) {
			value, found = def.value, true
		}
	}
	return value, found
}

// rejoinColonScalar undoes a quirk of goccy/go-yaml v1.19: inside a flow
// mapping it splits a plain scalar such as "https://etcd-1:2379" at a ':'
// into a mapping of one entry (goccy/go-yaml#832), so the spec's own
// `metadata: {etcd: [https://etcd-1:2379]}` would not read as a URL. YAML
// reads a ':' that is not followed by a space as part of a plain scalar, so
// where a string is expected, a one-entry mapping whose plain key, ':' and
// plain scalar value touch on one line is read back as "key:value".
func rejoinColonScalar(n ast.Node) (string, bool) {
	kvs, ok := mappingValues(n)
	if !ok || len(kvs) != 1 || isNil(kvs[0]) || kvs[0].Start == nil {
		return "", false
	}
	kv := kvs[0]
	key, kok := plainScalar(kv.Key)
	val, vok := plainScalar(kv.Value)
	if !kok || !vok {
		return "", false
	}
	k, c, v := posOf(kv.Key), tokenPos(kv.Start), posOf(kv.Value)
	touch := k.line == c.line && c.line == v.line &&
		k.col+utf8.RuneCountInString(key) == c.col && c.col+1 == v.col
	if !touch {
		return "", false
	}
	return key + ":" + val, true
}

// plainScalar returns the text of an unquoted, single-line scalar.
func plainScalar(n ast.Node) (string, bool) {
	if isNil(n) {
		return "", false
	}
	switch n.(type) {
	case *ast.StringNode, *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode:
	default:
		return "", false
	}
	tk := n.GetToken()
	if tk == nil || tk.Type == token.DoubleQuoteType || tk.Type == token.SingleQuoteType {
		return "", false
	}
	return tk.Value, true
}
