package bundle

import (
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
)

// Range is a bundle's part of the 32-bit topic hash space: hashes h with
// Lo <= h < Hi, except that the last range of a split includes
// 0xffffffff (Hi is 0xffffffff there, as in Pulsar's bundle names).
type Range struct {
	Lo, Hi uint32
}

// Split returns n equal ranges covering the hash space, in order.
// n < 1 is taken as 1.
func Split(n int) []Range {
	n = max(n, 1)
	out := make([]Range, n)
	const space = uint64(1) << 32
	for i := range out {
		lo := uint64(i) * space / uint64(n)
		hi := uint64(i+1) * space / uint64(n)
		if i == n-1 {
			hi = 0xffffffff
		}
		out[i] = Range{Lo: uint32(lo), Hi: uint32(hi)}
	}
	return out
}

// Contains reports whether hash h falls in r.
func (r Range) Contains(h uint32) bool {
	return h >= r.Lo && (h < r.Hi || r.Hi == 0xffffffff)
}

// String is the range as Pulsar names bundles: "0x00000000_0x40000000".
func (r Range) String() string {
	b := make([]byte, 0, 21)
	b = appendHex8(append(b, "0x"...), r.Lo)
	b = appendHex8(append(b, "_0x"...), r.Hi)
	return string(b)
}

// appendHex8 appends v as 8 lower-case hex digits (Sprintf's %08x,
// without its cost: placement formats every bundle id often).
func appendHex8(b []byte, v uint32) []byte {
	const digits = "0123456789abcdef"
	for shift := 28; shift >= 0; shift -= 4 {
		b = append(b, digits[(v>>uint(shift))&0xf])
	}
	return b
}

// ParseRange parses a range's String form. Errors name what is wrong.
func ParseRange(s string) (Range, error) {
	lo, hi, ok := strings.Cut(s, "_")
	if !ok {
		return Range{}, fmt.Errorf("bundle range %q: want 0xLLLLLLLL_0xHHHHHHHH", s)
	}
	l, err1 := parseHex(lo)
	h, err2 := parseHex(hi)
	if err := errors.Join(err1, err2); err != nil {
		return Range{}, fmt.Errorf("bundle range %q: %w", s, err)
	}
	if l >= h {
		return Range{}, fmt.Errorf("bundle range %q: the low bound is not below the high bound", s)
	}
	return Range{Lo: l, Hi: h}, nil
}

func parseHex(s string) (uint32, error) {
	if len(s) != 10 || !strings.HasPrefix(s, "0x") {
		return 0, fmt.Errorf("%q is not 0x and 8 hex digits", s)
	}
	v, err := strconv.ParseUint(s[2:], 16, 32)
	if err != nil {
		return 0, fmt.Errorf("%q is not 0x and 8 hex digits", s)
	}
	return uint32(v), nil
}

// TopicHash is the hash that places a topic in a bundle: FNV-1a (32 bit)
// of "tenant/namespace/topic", mixed by MurmurHash3's 32-bit finalizer
// (FNV-1a alone barely moves its high bits when only the last characters
// differ, so "t1".."t9" would share a bundle).
func TopicHash(tenant, namespace, topic string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(tenant))
	h.Write([]byte{'/'})
	h.Write([]byte(namespace))
	h.Write([]byte{'/'})
	h.Write([]byte(topic))
	x := h.Sum32()
	x ^= x >> 16
	x *= 0x85ebca6b
	x ^= x >> 13
	x *= 0xc2b2ae35
	x ^= x >> 16
	return x
}

// ID names a bundle: a namespace and one of its ranges.
type ID struct {
	Tenant, Namespace string
	Range             Range
}

// String is "tenant/namespace/0xLLLLLLLL_0xHHHHHHHH".
func (id ID) String() string { return id.Tenant + "/" + id.Namespace + "/" + id.Range.String() }

// ParseID parses an ID's String form. Errors name what is wrong.
func ParseID(s string) (ID, error) {
	p := strings.Split(s, "/")
	if len(p) != 3 || p[0] == "" || p[1] == "" {
		return ID{}, fmt.Errorf("bundle %q: want tenant/namespace/0xLLLLLLLL_0xHHHHHHHH", s)
	}
	r, err := ParseRange(p[2])
	if err != nil {
		return ID{}, fmt.Errorf("bundle %q: %w", s, err)
	}
	return ID{Tenant: p[0], Namespace: p[1], Range: r}, nil
}

// Namespace returns the IDs of a namespace split into n bundles.
func Namespace(tenant, namespace string, n int) []ID {
	rs := Split(n)
	out := make([]ID, len(rs))
	for i, r := range rs {
		out[i] = ID{Tenant: tenant, Namespace: namespace, Range: r}
	}
	return out
}

// Of returns the bundle of topic tenant/namespace/topic in a namespace
// split into n bundles.
func Of(tenant, namespace, topic string, n int) ID {
	h := TopicHash(tenant, namespace, topic)
	rs := Split(n)
	for _, r := range rs {
		if r.Contains(h) {
			return ID{Tenant: tenant, Namespace: namespace, Range: r}
		}
	}
	return ID{Tenant: tenant, Namespace: namespace, Range: rs[len(rs)-1]} // unreachable: the ranges cover the space
}
