package blob

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateName(t *testing.T) {
	valid := []string{
		"a", "a/b", "a/b/c.d", "ledgers/12-3f2a", "..a", "a..", "a/.b", "a b", "ünï", "x%2Fy",
		strings.Repeat("n", MaxNameLen), ".strata", "a/strata-x",
	}
	for _, n := range valid {
		if err := ValidateName(n); err != nil {
			t.Errorf("ValidateName(%q) = %v, want nil", n, err)
		}
	}
	invalid := map[string]string{
		"":                            "empty",
		"/a":                          `starts with "/"`,
		"a/":                          `ends with "/"`,
		"a//b":                        `"//"`,
		"..":                          `".." segment`,
		"a/../b":                      `".." segment`,
		"./a":                         `"." segment`,
		"a\x00b":                      "NUL",
		"a\nb":                        "control character 0x0a",
		"\xff":                        "UTF-8",
		".strata-tmp-1":               "reserved",
		"d/.strata-x":                 "reserved",
		strings.Repeat("n", 1025):     "1025 bytes",
		strings.Repeat("é", 600):      "1200 bytes",
		"a/" + strings.Repeat("/", 3): `ends with "/"`,
	}
	for n, why := range invalid {
		err := ValidateName(n)
		if !errors.Is(err, ErrInvalidName) || !strings.Contains(err.Error(), why) {
			t.Errorf("ValidateName(%.20q) = %v, want ErrInvalidName saying %q", n, err, why)
		}
	}
}

func TestCleanPrefix(t *testing.T) {
	for in, want := range map[string]string{
		"": "", "/": "", "//": "", "a": "a/", "a/": "a/", "/a/b/": "a/b/", "mesh/us-east": "mesh/us-east/",
	} {
		got, err := CleanPrefix(in)
		if err != nil || got != want {
			t.Errorf("CleanPrefix(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"a//b", "a/../b", "x\x00"} {
		if _, err := CleanPrefix(in); !errors.Is(err, ErrInvalidName) {
			t.Errorf("CleanPrefix(%q) = %v, want ErrInvalidName", in, err)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	ok := []Config{
		{Kind: KindFS, Dir: "/var/lib/strata/tier"},
		{Kind: KindFS, Dir: "d", Prefix: "us-east"},
		{Kind: KindMem},
		{Kind: KindS3, Bucket: "acme-us-east"},
		{Kind: KindS3, Bucket: "acme", Prefix: "mesh/us-east/", Region: "eu-west-1", Endpoint: "http://127.0.0.1:9000", PathStyle: true},
		{Kind: KindGCS, Bucket: "acme_eu.west", Endpoint: "https://storage.googleapis.com/storage/v1/"},
	}
	for _, c := range ok {
		if err := c.Validate(); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
	bad := []struct {
		c    Config
		want []string // each must appear in the error
	}{
		{Config{}, []string{"kind is required"}},
		{Config{Kind: "azure"}, []string{`unknown kind "azure"`, "fs, s3, gcs or mem"}},
		{Config{Kind: "S3", Bucket: "b"}, []string{`unknown kind "S3"`}},
		{Config{Kind: KindFS}, []string{"kind fs: dir is required"}},
		{Config{Kind: KindS3}, []string{"kind s3: bucket is required"}},
		{Config{Kind: KindGCS}, []string{"kind gcs: bucket is required"}},
		{Config{Kind: KindS3, Bucket: "Acme/Bucket"}, []string{"kind s3: bucket", "not allowed"}},
		{Config{Kind: KindGCS, Bucket: "ab"}, []string{"2 characters"}},
		{Config{Kind: KindS3, Bucket: "b12", Endpoint: "localhost:9000"}, []string{"endpoint", "http:// or https://"}},
		{Config{Kind: KindGCS, Bucket: "b12", Endpoint: "http://"}, []string{"endpoint", "no host"}},
		{Config{Kind: KindGCS, Bucket: "b12", Region: "us"}, []string{"kind gcs: region does not apply"}},
		{Config{Kind: KindGCS, Bucket: "b12", PathStyle: true}, []string{"path_style does not apply"}},
		{Config{Kind: KindFS, Dir: "d", Bucket: "b12"}, []string{"kind fs: bucket does not apply (only dir, prefix)"}},
		{Config{Kind: KindS3, Bucket: "b12", Dir: "/x"}, []string{"kind s3: dir does not apply"}},
		{Config{Kind: KindMem, Dir: "/x"}, []string{"kind mem: dir does not apply"}},
		{Config{Kind: KindS3, Bucket: "b12", Prefix: "a/../b"}, []string{"prefix", `".." segment`}},
		// Every problem at once.
		{Config{Kind: KindS3, Prefix: "a//b", Endpoint: "ftp://x", Dir: "d"},
			[]string{"bucket is required", "endpoint", "dir does not apply", "prefix"}},
	}
	for _, b := range bad {
		err := b.c.Validate()
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: got %v, want ErrInvalidConfig", b.c, err)
			continue
		}
		for _, w := range b.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: error %q does not say %q", b.c, err, w)
			}
		}
	}
}
