package blob

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzValidateName: any string is accepted or refused with
// ErrInvalidName, never panics; an accepted name is valid UTF-8, not
// empty, within MaxNameLen, and has no empty, "." or ".." segment.
func FuzzValidateName(f *testing.F) {
	for _, s := range []string{"a/b", "", "/a", "a//b", "../x", "a/./b", ".strata-tmp", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := ValidateName(name)
		if err != nil {
			if !errors.Is(err, ErrInvalidName) {
				t.Fatalf("ValidateName(%q) = %v, not ErrInvalidName", name, err)
			}
			return
		}
		if name == "" || len(name) > MaxNameLen || !utf8.ValidString(name) {
			t.Fatalf("ValidateName accepted %q", name)
		}
		for _, seg := range strings.Split(name, "/") {
			if seg == "" || seg == "." || seg == ".." {
				t.Fatalf("ValidateName accepted %q (segment %q)", name, seg)
			}
		}
	})
}

// FuzzConfigValidate: any configuration is valid or refused with errors
// wrapping ErrInvalidConfig; never panics.
func FuzzConfigValidate(f *testing.F) {
	f.Add("s3", "b", "p/", "us-east-1", "http://127.0.0.1:9000", true, "")
	f.Add("fs", "", "", "", "", false, "/tmp/x")
	f.Add("gcs", "", "a//b", "", "127.0.0.1:4443", false, "")
	f.Fuzz(func(t *testing.T, kind, bucket, prefix, region, endpoint string, pathStyle bool, dir string) {
		c := Config{Kind: kind, Bucket: bucket, Prefix: prefix, Region: region, Endpoint: endpoint, PathStyle: pathStyle, Dir: dir}
		if err := c.Validate(); err != nil && !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("Validate(%+v) = %v, not ErrInvalidConfig", c, err)
		}
	})
}
