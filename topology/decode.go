package topology

import (
	"encoding"
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync"

	"github.com/goccy/go-yaml/ast"
)

// The decoder walks goccy/go-yaml's AST into the model structs, matching
// mapping keys to yaml struct tags. It never stops at a problem: a value
// that cannot be decoded is reported, marked bad in the index and left at
// its zero value, and the walk goes on. It records the position of every
// path it decodes so that the checks can point into the file.
//
// Anchors, aliases and merge keys ("<<: *base") are supported; tags are
// ignored. The walk follows the Go types, whose nesting is finite, so an
// alias that refers to its own anchor cannot loop; expansion is still
// bounded by maxValues.

// maxValues bounds the values decoded from one file, aliases expanded.
const maxValues = 250_000

type decoder struct {
	*report
	anchors anchors
	budget  int
}

func newDecoder(r *report, root ast.Node) *decoder {
	d := &decoder{report: r, anchors: anchors{}, budget: maxValues}
	d.anchors.collect(root, 0)
	return d
}

// fail reports that the value of path (node n) cannot be decoded.
func (d *decoder) fail(n ast.Node, path, format string, args ...any) {
	d.ix.bad[path] = true
	d.errorAt(posOf(n), path, format, args...)
}

// value decodes n into v. A null value leaves v alone and is not recorded,
// so it reads as "not written".
func (d *decoder) value(n ast.Node, v reflect.Value, path string) {
	n = d.resolve(n, path)
	if isNil(n) || n.Type() == ast.NullType {
		return
	}
	if d.budget--; d.budget < 0 {
		if d.budget == -1 {
			d.fail(n, path, "too many values (more than %d, aliases expanded)", maxValues)
		}
		return
	}
	d.ix.vals[path] = posOf(n)
	d.into(n, v, path)
}

// resolve follows aliases and strips anchors and tags.
func (d *decoder) resolve(n ast.Node, path string) ast.Node {
	for i := 0; i < 16; i++ {
		n = unwrap(n)
		a, ok := n.(*ast.AliasNode)
		if !ok || isNil(n) {
			return n
		}
		target, found := d.anchors.lookup(a)
		if !found {
			name, _ := scalarText(a.Value)
			d.fail(a, path, "unknown alias *%s (no anchor &%s before it)", name, name)
			return nil
		}
		n = target
	}
	d.fail(n, path, "aliases nested too deeply")
	return nil
}

var (
	metadataType      = reflect.TypeFor[Metadata]()
	textUnmarshalType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

func (d *decoder) into(n ast.Node, v reflect.Value, path string) {
	if v.Type() == metadataType {
		d.metadata(n, v, path)
		return
	}
	if reflect.PointerTo(v.Type()).Implements(textUnmarshalType) {
		d.text(n, v, path)
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.into(n, v.Elem(), path)
	case reflect.Struct:
		d.mapping(n, v, path)
	case reflect.Map:
		d.dict(n, v, path)
	case reflect.Slice:
		d.list(n, v, path)
	case reflect.String:
		d.str(n, v, path)
	case reflect.Int, reflect.Int64:
		d.integer(n, v, path)
	case reflect.Bool:
		d.boolean(n, v, path)
	default:
		panic("topology: no decoder for " + v.Type().String())
	}
}

func (d *decoder) typeError(n ast.Node, t reflect.Type, path string) {
	d.fail(n, path, "expected %s, got %s", describeType(t), describe(n))
}

// describeType names what a Go type is written as in YAML.
func describeType(t reflect.Type) string {
	switch t {
	case reflect.TypeFor[Size]():
		return "a size (e.g. 256MiB)"
	case reflect.TypeFor[Duration]():
		return "a duration (e.g. 90s)"
	case reflect.TypeFor[MsgRate]():
		return "a rate (e.g. 5000/s)"
	case reflect.TypeFor[ByteRate]():
		return "a byte rate (e.g. 10MiB/s)"
	case metadataType:
		return `"embedded" or a mapping {etcd: [...], prefix: ...}`
	}
	switch t.Kind() {
	case reflect.Pointer:
		return describeType(t.Elem())
	case reflect.Struct, reflect.Map:
		return "a mapping"
	case reflect.Slice:
		return "a list"
	case reflect.Int, reflect.Int64:
		return "an integer"
	case reflect.Bool:
		return "a boolean (true or false)"
	}
	return "a string"
}

func (d *decoder) list(n ast.Node, v reflect.Value, path string) {
	seq, ok := n.(*ast.SequenceNode)
	if !ok {
		d.typeError(n, v.Type(), path)
		return
	}
	s := reflect.MakeSlice(v.Type(), len(seq.Values), len(seq.Values))
	for i, e := range seq.Values {
		d.value(e, s.Index(i), elem(path, i))
	}
	v.Set(s)
}

func (d *decoder) str(n ast.Node, v reflect.Value, path string) {
	text, ok := scalarText(n)
	if !ok {
		text, ok = rejoinColonScalar(n)
	}
	if _, isBool := n.(*ast.BoolNode); !ok || isBool {
		d.typeError(n, v.Type(), path)
		return
	}
	v.SetString(text)
}

func (d *decoder) integer(n ast.Node, v reflect.Value, path string) {
	in, ok := n.(*ast.IntegerNode)
	if !ok {
		if text, _ := plainScalar(n); isDigits(strings.TrimPrefix(text, "-")) {
			d.fail(n, path, "%s is too large", text) // beyond uint64: the parser keeps it a string
			return
		}
		d.typeError(n, v.Type(), path)
		return
	}
	var i int64
	switch x := in.Value.(type) {
	case int64:
		i, ok = x, true
	case uint64:
		i, ok = int64(x), x <= math.MaxInt64
	default:
		ok = false
	}
	if !ok || v.OverflowInt(i) {
		text, _ := scalarText(n)
		d.fail(n, path, "%s is too large", text)
		return
	}
	v.SetInt(i)
}

func isDigits(s string) bool {
	return s != "" && digits(s) == len(s)
}

func (d *decoder) boolean(n ast.Node, v reflect.Value, path string) {
	b, ok := n.(*ast.BoolNode)
	if !ok {
		d.typeError(n, v.Type(), path)
		return
	}
	v.SetBool(b.Value)
}

// text decodes a unit type (Size, Duration, …) through UnmarshalText.
func (d *decoder) text(n ast.Node, v reflect.Value, path string) {
	text, ok := scalarText(n)
	if _, isBool := n.(*ast.BoolNode); !ok || isBool {
		d.typeError(n, v.Type(), path)
		return
	}
	u := v.Addr().Interface().(encoding.TextUnmarshaler)
	if err := u.UnmarshalText([]byte(text)); err != nil {
		d.fail(n, path, "%s", err.Error())
	}
}

// metadata decodes the scalar "embedded" or a mapping {etcd, prefix}; a
// mapping without etcd endpoints is embedded metadata with a prefix.
func (d *decoder) metadata(n ast.Node, v reflect.Value, path string) {
	md := v.Addr().Interface().(*Metadata)
	if text, ok := scalarText(n); ok {
		if text != "embedded" {
			d.fail(n, path, `want "embedded" or a mapping {etcd: [...], prefix: ...}, got %s`, describe(n))
			return
		}
		md.Embedded = true
		return
	}
	if _, ok := mappingValues(n); !ok {
		d.typeError(n, v.Type(), path)
		return
	}
	d.mapping(n, v, path)
	md.Embedded = !d.ix.has(field(path, "etcd"))
}

// structInfo maps a struct's yaml keys to its field indexes.
type structInfo struct {
	index map[string]int
	names []string // in declaration order, for messages
}

var structInfos sync.Map // reflect.Type → *structInfo

func infoOf(t reflect.Type) *structInfo {
	if si, ok := structInfos.Load(t); ok {
		return si.(*structInfo)
	}
	si := &structInfo{index: map[string]int{}}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		si.index[name] = i
		si.names = append(si.names, name)
	}
	structInfos.Store(t, si)
	return si
}

// mapping decodes a mapping into struct v, reporting unknown fields.
func (d *decoder) mapping(n ast.Node, v reflect.Value, path string) {
	entries, ok := d.entries(n, path, 0)
	if !ok {
		d.typeError(n, v.Type(), path)
		return
	}
	si := infoOf(v.Type())
	for _, e := range entries {
		fp := field(path, e.name)
		i, ok := si.index[e.name]
		if !ok {
			d.errorAt(e.at, fp, "unknown field%s", suggestField(e.name, si.names))
			continue
		}
		d.ix.keys[fp] = e.at
		d.value(e.value, v.Field(i), fp)
	}
}

// dict decodes a mapping whose keys are names the file chooses (region
// names of per-region quotas) into a map[string]T; each value's path is
// the map's path and its key ("quotas.regions.us-east"). The checks,
// not the decoder, say which keys are allowed.
func (d *decoder) dict(n ast.Node, v reflect.Value, path string) {
	if v.Type().Key().Kind() != reflect.String {
		panic("topology: no decoder for " + v.Type().String())
	}
	entries, ok := d.entries(n, path, 0)
	if !ok {
		d.typeError(n, v.Type(), path)
		return
	}
	m := reflect.MakeMapWithSize(v.Type(), len(entries))
	for _, e := range entries {
		fp := field(path, e.name)
		d.ix.keys[fp] = e.at
		ev := reflect.New(v.Type().Elem()).Elem()
		d.value(e.value, ev, fp)
		m.SetMapIndex(reflect.ValueOf(e.name).Convert(v.Type().Key()), ev)
	}
	v.Set(m)
}

func suggestField(name string, known []string) string {
	if s := suggest(name, known); s != "" {
		return fmt.Sprintf(" (did you mean %q?)", s)
	}
	return "; known fields: " + strings.Join(known, ", ")
}
