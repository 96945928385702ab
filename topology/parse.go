package topology

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"reflect"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

// Parse decodes, defaults and validates a topology file. filename is used
// only in problem positions. When the file is invalid, m is nil and err is
// a Problems value holding every error in file order. Warnings (risky but
// legal choices) are returned whether or not the file is valid.
func Parse(filename string, data []byte) (m *Mesh, warnings []Problem, err error) {
	r := newReport(filename)
	m = &Mesh{}
	if root := r.document(data); root != nil {
		d := newDecoder(r, root)
		d.value(root, reflect.ValueOf(m).Elem(), "")
		if d.budget >= 0 { // else the file is cut short: checking it is moot
			checkMesh(r, m)
			applyDefaults(m)
			checkResolved(r, m)
		}
	}
	warnings, errs := r.finish()
	if len(errs) > 0 {
		return nil, warnings, errs
	}
	return m, warnings, nil
}

// LoadFile reads the file at path and Parses it. A read error is returned
// as a plain wrapped error; problems in the file as Problems.
func LoadFile(path string) (*Mesh, []Problem, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("topology: %w", err)
	}
	return Parse(path, data)
}

// document parses data as YAML and returns the body of its one document,
// or nil after reporting a syntax error, an empty file or a file whose top
// level is null.
func (r *report) document(data []byte) ast.Node {
	data = bytes.TrimPrefix(data, utf8BOM)
	if len(data) > MaxFileSize {
		r.errorAt(pos{1, 1}, "", "the file is %d bytes; a topology file may be at most %d", len(data), MaxFileSize)
		return nil
	}
	if line, col, ok := tooDeep(data); !ok {
		r.errorAt(pos{line, col}, "", "flow collections ([ ] and { }) nest deeper than %d levels", maxFlowDepth)
		return nil
	}
	f, err := parseYAML(data)
	if err != nil || f == nil {
		r.syntaxError(err)
		return nil
	}
	var bodies []ast.Node
	for _, doc := range f.Docs {
		if !isNil(doc) && !isNil(doc.Body) {
			bodies = append(bodies, doc.Body)
		}
	}
	for _, extra := range bodies[min(1, len(bodies)):] {
		r.errorAt(posOf(extra), "", "a second YAML document: a topology file holds one")
	}
	if len(bodies) == 0 || unwrap(bodies[0]).Type() == ast.NullType {
		r.errorAt(pos{1, 1}, "", "the file is empty: want a mapping with mesh and regions")
		return nil
	}
	return bodies[0]
}

// utf8BOM is the byte order mark some editors put at the start of a file.
var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// MaxFileSize is the largest topology file Parse accepts, in bytes.
const MaxFileSize = 4 << 20

// maxFlowDepth bounds [ ] / { } nesting before the file reaches the YAML
// parser, whose memory grows with the square of the depth.
const maxFlowDepth = 64

// tooDeep scans for flow-collection nesting deeper than maxFlowDepth,
// skipping quoted strings and comments, and returns where it got too deep
// (1-based) with ok false.
func tooDeep(data []byte) (line, col int, ok bool) {
	depth, line, col := 0, 1, 0
	var quote byte
	comment := false
	for i, c := range data {
		col++
		switch {
		case c == '\n':
			line, col, comment = line+1, 0, false
			if quote == '\'' {
				continue
			}
		case comment:
		case quote != 0:
			if c == quote && (quote == '\'' || i == 0 || data[i-1] != '\\') {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '#' && (i == 0 || data[i-1] == ' ' || data[i-1] == '\t'):
			comment = true
		case c == '[' || c == '{':
			if depth++; depth > maxFlowDepth {
				return line, col, false
			}
		case c == ']' || c == '}':
			depth = max(0, depth-1)
		}
	}
	return 0, 0, true
}

// parseYAML runs goccy/go-yaml's parser, turning a panic inside it into an
// error so that no input can crash the caller.
func parseYAML(data []byte) (f *ast.File, err error) {
	defer func() {
		if v := recover(); v != nil {
			f, err = nil, fmt.Errorf("the YAML parser failed: %v", v)
		}
	}()
	return parser.ParseBytes(data, 0, parser.AllowDuplicateMapKey())
}

// tokenError is what goccy/go-yaml's syntax errors offer.
type tokenError interface {
	GetToken() *token.Token
	GetMessage() string
}

func (r *report) syntaxError(err error) {
	at, msg := pos{1, 1}, "malformed YAML"
	if err != nil {
		msg = err.Error()
	}
	var te tokenError
	if errors.As(err, &te) {
		at, msg = tokenPos(te.GetToken()), te.GetMessage()
	}
	if msg == "" {
		msg = "malformed YAML"
	}
	r.errorAt(at, "", "syntax error: %s", msg)
}
