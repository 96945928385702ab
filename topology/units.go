package topology

import (
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"
)

// Size units: B KB MB GB TB are powers of 1000, KiB MiB GiB TiB powers of
// 1024.
const (
	Byte Size = 1
	KB        = 1000 * Byte
	MB        = 1000 * KB
	GB        = 1000 * MB
	TB        = 1000 * GB
	KiB       = 1024 * Byte
	MiB       = 1024 * KiB
	GiB       = 1024 * MiB
	TiB       = 1024 * GiB
)

type unit struct {
	name string
	mult int64
}

// sizeUnits is ordered largest first, so String finds the shortest form.
var sizeUnits = []unit{
	{"TiB", int64(TiB)}, {"TB", int64(TB)}, {"GiB", int64(GiB)}, {"GB", int64(GB)},
	{"MiB", int64(MiB)}, {"MB", int64(MB)}, {"KiB", int64(KiB)}, {"KB", int64(KB)}, {"B", 1},
}

const (
	msNanos  = int64(1e6)
	dayNanos = 24 * 3600 * int64(1e9)
)

var durationUnits = []unit{
	{"d", dayNanos}, {"h", 3600 * int64(1e9)}, {"m", 60 * int64(1e9)}, {"s", int64(1e9)}, {"ms", msNanos},
}

const (
	sizeUnitList     = "B, KB, MB, GB, TB, KiB, MiB, GiB, TiB"
	durationUnitList = "ms, s, m, h, d"
	maxUnitText      = 64 // longer unit values are rejected unread
	maxDigits        = 40 // digits in one number
)

// ParseSize parses a byte count: a whole or decimal number followed by one
// of B KB MB GB TB (powers of 1000) or KiB MiB GiB TiB (powers of 1024),
// e.g. "256MiB", "1.5GB"; a bare integer is bytes. Spaces may separate the
// number and the unit. Negative values, fractions of a byte and values
// above 2^63-1 bytes are errors.
func ParseSize(s string) (Size, error) {
	n, err := parseSize(s)
	return Size(n), err
}

// ParseDuration parses a span of time: one or more number-unit pairs with
// units ms s m h d, e.g. "500ms", "90s", "7d", "1h30m", "1.5h". A bare
// number (even 0) needs a unit. Negative values and values above about
// 106751 days are errors.
func ParseDuration(s string) (Duration, error) {
	t, err := checkUnitText(s)
	if err != nil {
		return 0, err
	}
	total := new(big.Rat)
	rest := t
	for rest != "" {
		num, after, ok := scanNumber(rest)
		if !ok {
			return 0, fmt.Errorf("%q is not a duration (e.g. 500ms, 90s, 1h30m, 7d)", s)
		}
		name, after := scanUnit(strings.TrimLeft(after, " "))
		switch {
		case name == "" && after == "":
			return 0, fmt.Errorf("%q needs a unit (%s)", s, durationUnitList)
		case name == "":
			return 0, fmt.Errorf("%q is not a duration (e.g. 500ms, 90s, 1h30m, 7d)", s)
		}
		mult, ok := lookupUnit(durationUnits, name)
		if !ok {
			return 0, fmt.Errorf("unknown duration unit %q in %q (want %s)", name, s, durationUnitList)
		}
		total.Add(total, scaled(num, mult))
		rest = strings.TrimLeft(after, " ")
	}
	n, err := wholeInt64(total, s, "nanosecond", "106751d")
	return Duration(n), err
}

// ParseMsgRate parses messages per second: a whole count followed by
// "/s", e.g. "5000/s".
func ParseMsgRate(s string) (MsgRate, error) {
	t, err := cutPerSecond(s, "5000/s")
	if err != nil {
		return 0, err
	}
	num, rest, ok := scanNumber(t)
	if !ok || rest != "" {
		return 0, fmt.Errorf("%q is not a message rate (e.g. 5000/s)", s)
	}
	n, err := wholeInt64(scaled(num, 1), s, "message", "9223372036854775807/s")
	return MsgRate(n), err
}

// ParseByteRate parses bytes per second: a size (see ParseSize) followed
// by "/s", e.g. "10MiB/s".
func ParseByteRate(s string) (ByteRate, error) {
	t, err := cutPerSecond(s, "10MiB/s")
	if err != nil {
		return 0, err
	}
	n, err := parseSize(t)
	if err != nil {
		return 0, fmt.Errorf("in rate %q: %w", s, err)
	}
	return ByteRate(n), nil
}

func parseSize(s string) (int64, error) {
	t, err := checkUnitText(s)
	if err != nil {
		return 0, err
	}
	num, rest, ok := scanNumber(t)
	if !ok {
		return 0, fmt.Errorf("%q is not a size (e.g. 4096, 512MiB, 10GB)", s)
	}
	mult := int64(1)
	if rest = strings.TrimLeft(rest, " "); rest != "" {
		if mult, ok = lookupUnit(sizeUnits, rest); !ok {
			return 0, fmt.Errorf("unknown size unit %q in %q (want %s)", rest, s, sizeUnitList)
		}
	}
	return wholeInt64(scaled(num, mult), s, "byte", "8388607TiB")
}

// checkUnitText trims s and rejects what no unit parser accepts.
func checkUnitText(s string) (string, error) {
	t := strings.TrimSpace(s)
	switch {
	case t == "":
		return "", errors.New("empty value")
	case len(t) > maxUnitText:
		return "", fmt.Errorf("value of %d characters is too long", len(t))
	case t[0] == '-':
		return "", fmt.Errorf("%q is negative", s)
	}
	return t, nil
}

func cutPerSecond(s, example string) (string, error) {
	t, err := checkUnitText(s)
	if err != nil {
		return "", err
	}
	t, ok := strings.CutSuffix(t, "/s")
	if !ok {
		return "", fmt.Errorf("%q needs \"/s\" (e.g. %s)", s, example)
	}
	return strings.TrimRight(t, " "), nil
}

// scanNumber splits a leading decimal number ("12", "1.5") off s.
func scanNumber(s string) (num, rest string, ok bool) {
	i := digits(s)
	if i == 0 || i > maxDigits {
		return "", s, false
	}
	if i < len(s) && s[i] == '.' {
		j := digits(s[i+1:])
		if j == 0 || i+j > maxDigits {
			return "", s, false
		}
		i += 1 + j
	}
	return s[:i], s[i:], true
}

func digits(s string) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

// scanUnit splits a leading run of ASCII letters off s.
func scanUnit(s string) (name, rest string) {
	i := 0
	for i < len(s) && (s[i] >= 'a' && s[i] <= 'z' || s[i] >= 'A' && s[i] <= 'Z') {
		i++
	}
	return s[:i], s[i:]
}

func lookupUnit(units []unit, name string) (int64, bool) {
	for _, u := range units {
		if u.name == name {
			return u.mult, true
		}
	}
	return 0, false
}

// scaled returns num × mult exactly; num has passed scanNumber.
func scaled(num string, mult int64) *big.Rat {
	r, _ := new(big.Rat).SetString(num)
	return r.Mul(r, new(big.Rat).SetInt64(mult))
}

// wholeInt64 converts r to int64, or says why it cannot: a fraction of the
// smallest unit, or more than the largest value (largest, as written).
func wholeInt64(r *big.Rat, text, smallest, largest string) (int64, error) {
	if !r.IsInt() {
		return 0, fmt.Errorf("%q is not a whole number of %ss", text, smallest)
	}
	if !r.Num().IsInt64() {
		return 0, fmt.Errorf("%q is too large (the largest is %s)", text, largest)
	}
	return r.Num().Int64(), nil
}

// String prints s with the unit that gives the smallest whole number,
// e.g. "256MiB", "1KB", "0B"; ParseSize(s.String()) == s.
func (s Size) String() string {
	if s < 0 {
		return "-" + formatSize(uint64(-(s+1))+1)
	}
	return formatSize(uint64(s))
}

func formatSize(u uint64) string {
	best := unit{"B", 1}
	for _, un := range sizeUnits {
		m := uint64(un.mult)
		if u%m == 0 && u/m < u/uint64(best.mult) {
			best = un
		}
	}
	return strconv.FormatUint(u/uint64(best.mult), 10) + best.name
}

// String prints d as days, hours, minutes, seconds and milliseconds, e.g.
// "7d", "1h30m", "500ms", "0s"; a part below a millisecond prints as a
// decimal of milliseconds ("1.5ms"). ParseDuration(d.String()) == d.
func (d Duration) String() string {
	if d < 0 {
		return "-" + formatDuration(uint64(-(d+1))+1)
	}
	return formatDuration(uint64(d))
}

func formatDuration(u uint64) string {
	if u == 0 {
		return "0s"
	}
	var b strings.Builder
	for _, un := range durationUnits[:4] {
		if q := u / uint64(un.mult); q > 0 {
			b.WriteString(strconv.FormatUint(q, 10) + un.name)
			u %= uint64(un.mult)
		}
	}
	if u > 0 {
		ms := strconv.FormatUint(u/uint64(msNanos), 10)
		if frac := u % uint64(msNanos); frac > 0 {
			ms += "." + strings.TrimRight(fmt.Sprintf("%06d", frac), "0")
		}
		b.WriteString(ms + "ms")
	}
	return b.String()
}

// String prints r as "5000/s".
func (r MsgRate) String() string { return strconv.FormatInt(int64(r), 10) + "/s" }

// String prints r as a size per second, e.g. "10MiB/s".
func (r ByteRate) String() string { return Size(r).String() + "/s" }

// Std returns d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// MarshalText prints s as String does.
func (s Size) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText parses text as ParseSize does.
func (s *Size) UnmarshalText(text []byte) (err error) {
	*s, err = ParseSize(string(text))
	return err
}

// MarshalYAML prints s as String does.
func (s Size) MarshalYAML() (any, error) { return s.String(), nil }

// MarshalText prints d as String does.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText parses text as ParseDuration does.
func (d *Duration) UnmarshalText(text []byte) (err error) {
	*d, err = ParseDuration(string(text))
	return err
}

// MarshalYAML prints d as String does.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// MarshalText prints r as String does.
func (r MsgRate) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText parses text as ParseMsgRate does.
func (r *MsgRate) UnmarshalText(text []byte) (err error) {
	*r, err = ParseMsgRate(string(text))
	return err
}

// MarshalYAML prints r as String does.
func (r MsgRate) MarshalYAML() (any, error) { return r.String(), nil }

// MarshalText prints r as String does.
func (r ByteRate) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText parses text as ParseByteRate does.
func (r *ByteRate) UnmarshalText(text []byte) (err error) {
	*r, err = ParseByteRate(string(text))
	return err
}

// MarshalYAML prints r as String does.
func (r ByteRate) MarshalYAML() (any, error) { return r.String(), nil }
