package wire

import (
	"encoding/json"
	"fmt"

	"github.com/stratamesh/strata/replicator"
)

// answerJSON is an answer on the wire.
type answerJSON struct {
	Batch uint64 `json:"batch"`
	Kind  string `json:"kind"`
	HWM   uint64 `json:"hwm"`
	Lost  uint64 `json:"lost,omitempty"`
	Error string `json:"error,omitempty"`
}

// Answer is a remote's reply to a batch with what the driver logs.
type Answer struct {
	replicator.Answer
	// Lost is how many origin sequences a gap record moved the remote's
	// high-water mark past (0 otherwise).
	Lost uint64
	// Error is a failure's reason (Kind Failed), for logs.
	Error string
}

// EncodeAnswer returns a's JSON encoding.
func EncodeAnswer(a Answer) []byte {
	b, _ := json.Marshal(answerJSON{Batch: a.Batch, Kind: a.Kind.String(), HWM: a.HWM, Lost: a.Lost, Error: a.Error})
	return b
}

// DecodeAnswer parses an answer. Errors (wrapping replicator.ErrInvalid):
// not a JSON object of that shape, or an unknown kind.
func DecodeAnswer(p []byte) (Answer, error) {
	var j answerJSON
	if err := json.Unmarshal(p, &j); err != nil {
		return Answer{}, fmt.Errorf("%w: answer: %v", replicator.ErrInvalid, err)
	}
	a := Answer{Answer: replicator.Answer{Batch: j.Batch, HWM: j.HWM}, Lost: j.Lost, Error: j.Error}
	switch j.Kind {
	case "stored":
		a.Kind = replicator.Stored
	case "duplicate":
		a.Kind = replicator.Duplicate
	case "gap-refused":
		a.Kind = replicator.GapRefused
	case "failed":
		a.Kind = replicator.Failed
	default:
		return Answer{}, fmt.Errorf("%w: answer kind %q (want stored, duplicate, gap-refused or failed)", replicator.ErrInvalid, j.Kind)
	}
	return a, nil
}
