package topology

import "github.com/goccy/go-yaml/ast"

// entry is one key: value of a mapping, after merge keys are applied.
type entry struct {
	name  string
	at    pos // the key
	value ast.Node
}

// maxMergeDepth bounds merge keys inside merged mappings.
const maxMergeDepth = 8

// entries lists a mapping's fields: its own keys in file order, then the
// keys merged in with "<<" that it does not set itself (earlier merge
// sources win, as YAML's merge key says). It reports duplicate keys and keys
// that are not scalars. ok is false when n is not a mapping.
func (d *decoder) entries(n ast.Node, path string, depth int) (out []entry, ok bool) {
	kvs, ok := mappingValues(n)
	if !ok {
		return nil, false
	}
	var merges []ast.Node
	seen := map[string]pos{}
	for _, kv := range kvs {
		if isNil(kv) || isNil(kv.Key) {
			continue
		}
		key := unwrap(kv.Key)
		if _, merge := key.(*ast.MergeKeyNode); merge {
			merges = append(merges, kv.Value)
			continue
		}
		at := posOf(kv.Key)
		name, ok := scalarText(key)
		if !ok {
			d.errorAt(at, path, "expected a field name, got %s", describe(key))
			continue
		}
		if first, dup := seen[name]; dup {
			d.errorAt(at, field(path, name), "duplicate field (first at line %d)", first.line)
			continue
		}
		seen[name] = at
		out = append(out, entry{name: name, at: at, value: kv.Value})
	}
	for _, m := range merges {
		for _, e := range d.merged(m, path, depth) {
			if _, dup := seen[e.name]; !dup {
				seen[e.name] = e.at
				out = append(out, e)
			}
		}
	}
	return out, true
}

// merged returns the entries a "<<" value brings in: a mapping, an alias
// to one, or a list of those.
func (d *decoder) merged(n ast.Node, path string, depth int) []entry {
	n = d.resolve(n, path)
	if isNil(n) {
		return nil
	}
	if depth >= maxMergeDepth {
		d.fail(n, path, "merge keys nested too deeply")
		return nil
	}
	list := []ast.Node{n}
	if seq, ok := n.(*ast.SequenceNode); ok {
		list = seq.Values
	}
	var out []entry
	for _, src := range list {
		src = d.resolve(src, path)
		if isNil(src) {
			continue
		}
		es, ok := d.entries(src, path, depth+1)
		if !ok {
			d.fail(src, path, `"<<" merges a mapping or a list of mappings, got %s`, describe(src))
		}
		out = append(out, es...)
	}
	return out
}
