package natsproto

import (
	"bytes"
	"slices"
	"strconv"
)

// Header blocks (NATS protocol: headers, §1.6 of nats-wire.md):
//
//	NATS/1.0[ <status>[ <description>]]\r\n
//	<Key>: <value>\r\n        (zero or more; keys may repeat, case is kept)
//	\r\n

// HeaderGet returns the value of the first header line in hdr whose key is
// exactly key (case-sensitive, as nats.go's Header.Get), with surrounding
// spaces and tabs trimmed; ok is false when there is none. The value
// aliases hdr. The first line (NATS/1.0 and status) is skipped; lines may
// end in CRLF or LF; the block ends at an empty line.
func HeaderGet(hdr []byte, key string) (value []byte, ok bool) {
	i := bytes.IndexByte(hdr, '\n')
	if i < 0 {
		return nil, false
	}
	rest := hdr[i+1:]
	for len(rest) > 0 {
		line := rest
		if j := bytes.IndexByte(rest, '\n'); j >= 0 {
			line, rest = rest[:j], rest[j+1:]
		} else {
			rest = nil
		}
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		if len(line) == 0 {
			break
		}
		if len(line) > len(key) && line[len(key)] == ':' && string(line[:len(key)]) == key {
			return trimSpace(line[len(key)+1:]), true
		}
	}
	return nil, false
}

// HeaderKeyWithPrefix returns the first header key in hdr that starts
// with prefix, compared without regard to ASCII case (e.g. "Strata-"), or
// ok false when none does. The first line is skipped, as in HeaderGet.
func HeaderKeyWithPrefix(hdr []byte, prefix string) (key string, ok bool) {
	i := bytes.IndexByte(hdr, '\n')
	if i < 0 {
		return "", false
	}
	rest := hdr[i+1:]
	for len(rest) > 0 {
		line := rest
		if j := bytes.IndexByte(rest, '\n'); j >= 0 {
			line, rest = rest[:j], rest[j+1:]
		} else {
			rest = nil
		}
		line = bytes.TrimSuffix(line, []byte{'\r'})
		if len(line) == 0 {
			break
		}
		k, _, found := bytes.Cut(line, []byte{':'})
		if found && len(k) >= len(prefix) && bytes.EqualFold(k[:len(prefix)], []byte(prefix)) {
			return string(k), true
		}
	}
	return "", false
}

// AppendStatusHeader appends a header block (NATS protocol: headers and
// status messages): "NATS/1.0", then " <status>" when status is not 0
// and, after a status, " <description>" when description is not empty,
// then a "<key>: <value>" line per pair in kv, then the empty line. For
// example the no-responders reply, AppendStatusHeader(nil, 503, "",
// "Nats-Subject", "x"), is "NATS/1.0 503\r\nNats-Subject: x\r\n\r\n".
// A status message goes out with an empty payload. It panics when kv has
// an odd length. Keys and values must not contain CR or LF, nor keys ':'.
func AppendStatusHeader(dst []byte, status int, description string, kv ...string) []byte {
	if len(kv)%2 != 0 {
		panic("natsproto: AppendStatusHeader: odd number of kv strings")
	}
	n := len("NATS/1.0  \r\n\r\n") + 20 + len(description)
	for _, s := range kv {
		n += len(s) + 2
	}
	dst = slices.Grow(dst, n)
	dst = append(dst, "NATS/1.0"...)
	if status != 0 {
		dst = append(dst, ' ')
		dst = strconv.AppendInt(dst, int64(status), 10)
		if description != "" {
			dst = append(dst, ' ')
			dst = append(dst, description...)
		}
	}
	dst = append(dst, "\r\n"...)
	for i := 0; i < len(kv); i += 2 {
		dst = append(dst, kv[i]...)
		dst = append(dst, ": "...)
		dst = append(dst, kv[i+1]...)
		dst = append(dst, "\r\n"...)
	}
	return append(dst, "\r\n"...)
}
