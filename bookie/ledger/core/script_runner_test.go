package core

// A minimal runner for interaction scripts in the file format of
// github.com/cockroachdb/datadriven (which this module does not require
// yet): blocks of
//
//	command arg key=val
//	----
//	expected output
//
// separated by blank lines; lines starting with # between blocks are
// comments. Expected output may not contain blank lines. With -update the
// expectations are rewritten from the actual output.

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the expected output of testdata scripts")

// cmdArg is one argument: "key" or "key=val".
type cmdArg struct {
	Key string
	Val string
	Has bool // whether "=val" was given
}

// testCase is one command block of a script.
type testCase struct {
	Pos      string // file:line
	Cmd      string
	Args     []cmdArg
	Expected string
}

// arg returns the i-th bare argument ("" if none).
func (d *testCase) arg(i int) string {
	n := 0
	for _, a := range d.Args {
		if !a.Has {
			if n == i {
				return a.Key
			}
			n++
		}
	}
	return ""
}

// val returns key's value and whether it was given.
func (d *testCase) val(key string) (string, bool) {
	for _, a := range d.Args {
		if a.Has && a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}

// intVal returns key's value as an int, or def.
func (d *testCase) intVal(t *testing.T, key string, def int64) int64 {
	v, ok := d.val(key)
	if !ok {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("%s: %s=%q: %v", d.Pos, key, v, err)
	}
	return n
}

// chunk is a piece of a script file: a test case, or raw lines kept as
// they are (comments and blank lines).
type chunk struct {
	tc  *testCase
	raw string
}

func parseScript(t *testing.T, path string) []chunk {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	var chunks []chunk
	for i := 0; i < len(lines); {
		line := lines[i]
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			chunks = append(chunks, chunk{raw: line})
			i++
			continue
		}
		tc := &testCase{Pos: fmt.Sprintf("%s:%d", filepath.Base(path), i+1)}
		fields := strings.Fields(line)
		tc.Cmd = fields[0]
		for _, f := range fields[1:] {
			k, v, has := strings.Cut(f, "=")
			tc.Args = append(tc.Args, cmdArg{Key: k, Val: v, Has: has})
		}
		i++
		if i >= len(lines) || lines[i] != "----" {
			t.Fatalf("%s: want ---- after the command", tc.Pos)
		}
		i++
		var exp []string
		for ; i < len(lines) && strings.TrimSpace(lines[i]) != ""; i++ {
			exp = append(exp, lines[i])
		}
		tc.Expected = strings.Join(exp, "\n")
		chunks = append(chunks, chunk{tc: tc})
	}
	return chunks
}

// runScript runs every case of the script at path through run, comparing
// (or with -update rewriting) the expected output.
func runScript(t *testing.T, path string, run func(t *testing.T, d *testCase) string) {
	chunks := parseScript(t, path)
	var out strings.Builder
	for _, c := range chunks {
		if c.tc == nil {
			out.WriteString(c.raw + "\n")
			continue
		}
		d := c.tc
		actual := strings.TrimRight(run(t, d), "\n")
		for _, l := range strings.Split(actual, "\n") {
			if strings.TrimSpace(l) == "" && actual != "" {
				t.Fatalf("%s: output has a blank line:\n%s", d.Pos, actual)
			}
		}
		if actual == "" {
			actual = "ok"
		}
		if !*update && actual != d.Expected {
			t.Fatalf("%s: %s\nexpected:\n%s\nactual:\n%s", d.Pos, cmdLine(d), d.Expected, actual)
		}
		out.WriteString(cmdLine(d) + "\n----\n" + actual + "\n")
	}
	if *update {
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func cmdLine(d *testCase) string {
	parts := []string{d.Cmd}
	for _, a := range d.Args {
		if a.Has {
			parts = append(parts, a.Key+"="+a.Val)
		} else {
			parts = append(parts, a.Key)
		}
	}
	return strings.Join(parts, " ")
}
