package wire

import (
	"encoding/json"
	"fmt"

	"github.com/stratamesh/strata/replicator"
)

// answerJSON is an answer on the wire.
type answerJSON struct {
	Batch uint64     `json:"batch"`
	Kind  string     `json:"kind"`
	HWM   uint64     `json:"hwm"`
	Lost  uint64     `json:"lost,omitempty"`
	Error string     `json:"error,omitempty"`
	Marks []markJSON `json:"marks,omitempty"`
}

// markJSON is a mark on the wire (the topic is the batch's).
type markJSON struct {
	Holder      string `json:"holder"`
	Region      string `json:"region"`
	Incarnation string `json:"incarnation"`
	HWM         uint64 `json:"hwm"`
}

// MaxMarks bounds an answer's marks (regions × streams of one topic).
const MaxMarks = 4096

// Mark is one high-water mark in an answer (issue 26 item 8): Holder
// stores every origin sequence <= HWM of the batch topic's stream
// (Region, Incarnation). The receiver sends its own marks and those it
// learned of the batch origin's streams at other regions.
type Mark struct {
	Holder, Region, Incarnation string
	HWM                         uint64
}

// Answer is a remote's reply to a batch with what the driver logs.
type Answer struct {
	replicator.Answer
	// Lost is how many origin sequences a gap record moved the remote's
	// high-water mark past (0 otherwise).
	Lost uint64
	// Error is a failure's reason (Kind Failed), for logs.
	Error string
	// Marks are the receiver's marks (relay knowledge); none from an
	// older receiver.
	Marks []Mark
}

// EncodeAnswer returns a's JSON encoding.
func EncodeAnswer(a Answer) []byte {
	j := answerJSON{Batch: a.Batch, Kind: a.Kind.String(), HWM: a.HWM, Lost: a.Lost, Error: a.Error}
	for _, m := range a.Marks {
		j.Marks = append(j.Marks, markJSON(m))
	}
	b, _ := json.Marshal(j)
	return b
}

// DecodeAnswer parses an answer. Errors (wrapping replicator.ErrInvalid):
// not a JSON object of that shape, an unknown kind, more than MaxMarks
// marks or a mark with an empty holder, region or incarnation.
func DecodeAnswer(p []byte) (Answer, error) {
	var j answerJSON
	if err := json.Unmarshal(p, &j); err != nil {
		return Answer{}, fmt.Errorf("%w: answer: %v", replicator.ErrInvalid, err)
	}
	a := Answer{Answer: replicator.Answer{Batch: j.Batch, HWM: j.HWM}, Lost: j.Lost, Error: j.Error}
	if len(j.Marks) > MaxMarks {
		return Answer{}, fmt.Errorf("%w: answer: %d marks (at most %d)", replicator.ErrInvalid, len(j.Marks), MaxMarks)
	}
	for i, m := range j.Marks {
		if m.Holder == "" || m.Region == "" || m.Incarnation == "" {
			return Answer{}, fmt.Errorf("%w: answer: mark %d has an empty holder, region or incarnation (%+v)", replicator.ErrInvalid, i, m)
		}
		a.Marks = append(a.Marks, Mark(m))
	}
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
