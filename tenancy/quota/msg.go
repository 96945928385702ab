package quota

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Msg is what a quota party sends to one peer every interval: brokers
// to their region's coordinator, coordinators to their brokers and to
// the other regions' coordinators. It is JSON on the wire.
//
// Times are the sender's own clock, in Unix nanoseconds; a receiver
// never compares them with its own clock, it only echoes them. That
// makes leases independent of clock skew (see the package doc).
type Msg struct {
	// From is the sender: "broker/<id>" or "region/<name>".
	From string `json:"from"`
	// Term is a coordinator's election term (0 from brokers): a new
	// coordinator is a new party, so its peers' leases to the old one
	// stay reserved until they expire. Every incarnation of a region's
	// coordinator needs a term of its own (an election's revision).
	Term uint64 `json:"term,omitempty"`
	// To is the receiver ("broker/<id>" or "region/<name>"): the driver
	// routes by it. ToTerm is the receiving coordinator's term as the
	// sender knows it (0: unknown, or a broker): a coordinator of another
	// term takes the message but not its Echo or leases, which were meant
	// for another incarnation and another clock.
	To     string `json:"to,omitempty"`
	ToTerm uint64 `json:"to_term,omitempty"`
	// Sent is the sender's clock when it sent the message.
	Sent int64 `json:"sent"`
	// Echo is the receiver's Sent of the newest message from it that the
	// sender had when sending (0: none). Leases in this message are valid
	// at the receiver until Echo + LendFor, on the receiver's clock.
	Echo int64 `json:"echo,omitempty"`
	// Tenants are the per-tenant entries (only tenants with quotas).
	Tenants map[string]*Entry `json:"tenants,omitempty"`
}

// Entry is one tenant's part of a Msg, per quota kind (indexed by Kind;
// fields that do not apply to a kind or direction are zero).
type Entry struct {
	// Offered and Admitted are a broker's cumulative publish counts
	// (messages; bytes) since it started: rates are their differences,
	// so a lost report loses no use.
	Offered  [NumKinds]float64 `json:"offered,omitempty"`
	Admitted [NumKinds]float64 `json:"admitted,omitempty"`
	// Demand (units/s) is a region's offered rate, between coordinators;
	// for a count, how many of its brokers were refused lately.
	Demand [NumKinds]float64 `json:"demand,omitempty"`
	// Rate (units/s) is the admitted rate: a region's between
	// coordinators, the mesh's from a coordinator to its brokers.
	Rate [NumKinds]float64 `json:"rate,omitempty"`
	// Use is a count's current value: a broker's or region's own; from a
	// coordinator to its brokers, the mesh's.
	Use [NumKinds]float64 `json:"use,omitempty"`
	// Allowance (units/s) is the sender's current allowance (rates).
	Allowance [NumKinds]float64 `json:"allowance,omitempty"`
	// Lend (units/s) is a lease from the sender to the receiver, valid at
	// the receiver until Msg.Echo + LendFor (nanoseconds).
	Lend    [NumKinds]float64 `json:"lend,omitempty"`
	LendFor [NumKinds]int64   `json:"lend_for,omitempty"`
	// Want (rates, units/s) asks the receiving broker to lend this much
	// of its static share to the coordinator (coordinator → broker), and
	// releases the rest: the coordinator counts the broker's leases it
	// had (those of reports up to Echo) only up to Want from the moment
	// it sends, so the broker may lower them to Want when it receives it.
	// Between coordinators (counts) it is the room the sender proposed
	// and has not handed out yet.
	Want [NumKinds]float64 `json:"want,omitempty"`
	// Cap is a count's cap: from a coordinator to a broker, the cap it
	// sets (for the kinds whose bit 1<<k is set in Caps; the others keep
	// theirs); from a broker, the cap it holds; between coordinators, the
	// count the sender's region may hold (its allotment: at least its
	// brokers' caps and use), with Use, Want and Demand, for the kinds
	// whose bit is set in Caps.
	Cap  [NumKinds]float64 `json:"cap,omitempty"`
	Caps uint8             `json:"caps,omitempty"`
	// Refused is a count of refusals since the sender started (counts:
	// demand for room).
	Refused [NumKinds]float64 `json:"refused,omitempty"`
}

// ErrBadMsg is returned by DecodeMsg for a message that is not a quota
// message.
var ErrBadMsg = errors.New("quota: bad message")

// DecodeMsg parses a quota message: JSON, a From, no negative amounts,
// LendFor within an hour. Per-kind arrays longer than the kinds known are
// cut (a newer peer's kinds); unknown fields are ignored.
func DecodeMsg(b []byte) (*Msg, error) {
	var m Msg
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadMsg, err)
	}
	if m.From == "" {
		return nil, fmt.Errorf("%w: no from", ErrBadMsg)
	}
	for t, e := range m.Tenants {
		if e == nil {
			return nil, fmt.Errorf("%w: tenant %q: null entry", ErrBadMsg, t)
		}
		for k := range NumKinds {
			for _, v := range []float64{e.Offered[k], e.Admitted[k], e.Demand[k], e.Rate[k], e.Use[k], e.Allowance[k], e.Lend[k], e.Want[k], e.Cap[k], e.Refused[k]} {
				if v < 0 || v != v {
					return nil, fmt.Errorf("%w: tenant %q %s: negative or NaN amount", ErrBadMsg, t, k)
				}
			}
			if e.LendFor[k] < 0 || e.LendFor[k] > int64(time.Hour) {
				return nil, fmt.Errorf("%w: tenant %q %s: lend_for %d ns out of range", ErrBadMsg, t, k, e.LendFor[k])
			}
		}
	}
	return &m, nil
}

// Encode is m as JSON.
func (m *Msg) Encode() []byte {
	b, _ := json.Marshal(m)
	return b
}

func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}
