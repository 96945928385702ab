package tenancy

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// Duration is a span of time in nanoseconds (the package does not import
// time; the value converts to time.Duration as is). In JSON it is a
// string of number-unit pairs with units ms s m h d ("500ms", "90s",
// "7d", "1h30m"); "0s" is zero.
type Duration int64

// Units of Duration.
const (
	Millisecond Duration = 1_000_000
	Second               = 1000 * Millisecond
	Minute               = 60 * Second
	Hour                 = 60 * Minute
	Day                  = 24 * Hour
)

var durationUnits = []struct {
	name string
	d    Duration
}{{"d", Day}, {"h", Hour}, {"m", Minute}, {"s", Second}, {"ms", Millisecond}}

// String writes d with the largest units first ("1d12h", "90ms"); "0s"
// for zero. Sub-millisecond remainders are written as "Nns".
func (d Duration) String() string {
	if d == 0 {
		return "0s"
	}
	var b strings.Builder
	if d < 0 {
		b.WriteByte('-')
		d = -d
	}
	for _, u := range durationUnits {
		if d >= u.d {
			b.WriteString(strconv.FormatInt(int64(d/u.d), 10))
			b.WriteString(u.name)
			d %= u.d
		}
	}
	if d > 0 {
		b.WriteString(strconv.FormatInt(int64(d), 10) + "ns")
	}
	return b.String()
}

// ParseDuration parses String's form: one or more whole-number-unit pairs
// (ms s m h d). Errors: empty text, a bare number, an unknown unit, a
// negative value, overflow.
func ParseDuration(s string) (Duration, error) {
	orig := s
	if s == "" {
		return 0, fmt.Errorf("empty duration: want e.g. 90s, 5m, 7d")
	}
	var total Duration
	for s != "" {
		i := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == 0 {
			return 0, fmt.Errorf("duration %q: want whole numbers with units ms, s, m, h, d (e.g. 90s, 7d)", orig)
		}
		n, err := strconv.ParseInt(s[:i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("duration %q: number too large", orig)
		}
		s = s[i:]
		j := 0
		for j < len(s) && (s[j] >= 'a' && s[j] <= 'z') {
			j++
		}
		unit := s[:j]
		s = s[j:]
		var u Duration
		switch unit {
		case "ms":
			u = Millisecond
		case "s":
			u = Second
		case "m":
			u = Minute
		case "h":
			u = Hour
		case "d":
			u = Day
		case "":
			return 0, fmt.Errorf("duration %q: a number needs a unit (ms, s, m, h, d)", orig)
		default:
			return 0, fmt.Errorf("duration %q: unknown unit %q (want ms, s, m, h, d)", orig, unit)
		}
		if n > int64((1<<63-1)/u) || total > (1<<63-1)-Duration(n)*u {
			return 0, fmt.Errorf("duration %q: too long", orig)
		}
		total += Duration(n) * u
	}
	return total, nil
}

// MarshalJSON writes the String form.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads the String form (ParseDuration's errors).
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return &json.UnmarshalTypeError{Value: string(b) + " (want a duration string such as \"90s\" or \"7d\")", Type: reflect.TypeFor[Duration]()}
	}
	v, err := ParseDuration(s)
	if err != nil {
		// An UnmarshalTypeError, so that encoding/json names the field.
		return &json.UnmarshalTypeError{Value: err.Error(), Type: reflect.TypeFor[Duration]()}
	}
	*d = v
	return nil
}
