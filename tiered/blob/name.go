package blob

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxNameLen is the longest object name in bytes, including a driver's
// configured prefix (S3's and GCS's key limit).
const MaxNameLen = 1024

// ReservedPrefix starts the names that drivers keep for their own
// bookkeeping (fsblob's temporary files): no segment of an object name
// may start with it.
const ReservedPrefix = ".strata-"

// ValidateName reports whether name is a valid object name, with an error
// wrapping ErrInvalidName that says why. A valid name
//   - is not empty and at most MaxNameLen bytes of valid UTF-8;
//   - has no NUL or other ASCII control character;
//   - is a list of non-empty segments separated by single slashes: it
//     neither starts nor ends with "/" and has no "//";
//   - has no "." or ".." segment and no segment starting with
//     ReservedPrefix.
//
// The rules are the intersection of what every driver can store the same
// way, so a name valid here means the same object in fs, S3 and GCS.
func ValidateName(name string) error {
	bad := func(why string) error {
		return fmt.Errorf("%w %q: %s", ErrInvalidName, truncate(name), why)
	}
	switch {
	case name == "":
		return fmt.Errorf("%w: empty", ErrInvalidName)
	case len(name) > MaxNameLen:
		return bad(fmt.Sprintf("%d bytes, the limit is %d", len(name), MaxNameLen))
	case !utf8.ValidString(name):
		return bad("not valid UTF-8")
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 0x20 || c == 0x7f {
			if c == 0 {
				return bad("contains NUL")
			}
			return bad(fmt.Sprintf("contains control character %#02x", c))
		}
	}
	if strings.HasPrefix(name, "/") {
		return bad(`starts with "/"`)
	}
	if strings.HasSuffix(name, "/") {
		return bad(`ends with "/"`)
	}
	for seg := range strings.SplitSeq(name, "/") {
		switch {
		case seg == "":
			return bad(`contains "//"`)
		case seg == "." || seg == "..":
			return bad(fmt.Sprintf("contains a %q segment", seg))
		case strings.HasPrefix(seg, ReservedPrefix):
			return bad(fmt.Sprintf("a segment starts with the reserved %q", ReservedPrefix))
		}
	}
	return nil
}

// truncate shortens s for error messages.
func truncate(s string) string {
	const max = 80
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}
