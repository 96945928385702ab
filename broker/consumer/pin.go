package consumer

import (
	"fmt"
	"slices"
	"time"

	"github.com/stratamesh/strata/broker/jsapi"
)

// Priority groups with priority_policy "pinned_client" (Pulsar's
// Exclusive/Failover subscriptions, spec §4), as nats-server ≥ 2.11 serves
// them. A consumer has one group. One waiting request at a time holds the
// pin: the first request served while nobody is pinned gets a new pin id
// (from the driver's PinIDs), and every message to it carries that id
// (Out.PinID, the Nats-Pin-Id header). The client sends the id with its
// next pulls; only those are served while the pin lives:
//   - a pull with another id gets "423 Nats-Pin-Id mismatch" at once;
//   - a pull without an id waits (a standby), expiring as usual;
//   - a waiting request whose id is not the current pin (the pin moved
//     after it arrived) gets "423 Nats-Wrong-Pin-Id" with its pending
//     headers when a message is dispatched.
//
// The pin ends when the pinned client sends no pull with the id for
// priority_timeout (counted from the pin or its latest such pull), or on
// Unpin (CONSUMER.UNPIN); the next message then goes to the oldest
// waiting request without an id, which gets a new pin. Messages pending
// at the old pin are redelivered by the usual rules (ack_wait, NAK), to
// the new pin, before new messages. The pin lives in memory only, as on
// the reference: a restored consumer starts unpinned.

// pinState is the pin of the consumer's priority group.
type pinState struct {
	id       string    // "" when nobody is pinned
	ts       time.Time // when the pin was given (pinned_ts)
	deadline time.Time // the pin ends here unless the client pulls again
}

func (c *Consumer) pinned() bool { return c.cfg.PriorityPolicy == jsapi.PriorityPinned }

// checkPriority validates the priority fields of a config the core serves:
// pinned_client with exactly one group.
func checkPriority(cfg *jsapi.ConsumerConfig) (unsupported []string, err error) {
	switch cfg.PriorityPolicy {
	case jsapi.PriorityNone:
		if cfg.PriorityTimeout > 0 {
			return nil, fmt.Errorf("%w: priority_timeout without priority_policy", ErrInvalidConfig)
		}
		return nil, nil
	case jsapi.PriorityPinned:
	default:
		return []string{"priority_policy " + string(cfg.PriorityPolicy)}, nil
	}
	for _, g := range cfg.PriorityGroups {
		if !jsapi.ValidPriorityGroup(g) {
			return nil, fmt.Errorf("%w: priority group name %q", ErrInvalidConfig, g)
		}
	}
	if len(cfg.PriorityGroups) != 1 {
		return []string{"priority_groups with more than one group"}, nil
	}
	return nil, nil
}

// pullPriority checks a pull's priority-group fields as the reference
// does, in its order, and refreshes the pin when the pinned client pulls.
// It returns the refusal (status, description), or 0.
func (c *Consumer) pullPriority(now time.Time, req *jsapi.PullRequest) (int, string) {
	switch {
	case (req.MinPending != 0 || req.MinAckPending != 0) && c.cfg.PriorityPolicy != jsapi.PriorityOverflow:
		return jsapi.StatusBadRequest, jsapi.DescBadRequest("Not a Overflow Priority consumer")
	case req.ID != "" && !c.pinned():
		return jsapi.StatusBadRequest, jsapi.DescBadRequest("Not a Pinned Client Priority consumer")
	case !c.pinned():
		return 0, "" // the group of a pull on a consumer without groups is ignored
	case req.Group == "":
		return jsapi.StatusBadRequest, jsapi.DescBadRequest("Priority Group missing")
	case !slices.Contains(c.cfg.PriorityGroups, req.Group):
		return jsapi.StatusBadRequest, jsapi.DescBadRequest("Invalid Priority Group")
	}
	if c.pin.id != "" {
		if req.ID == c.pin.id {
			c.pin.deadline = now.Add(c.cfg.PriorityTimeout)
		} else if req.ID != "" {
			return jsapi.StatusPinIDMismatch, jsapi.DescPinIDMismatch
		}
	}
	return 0, ""
}

// pickPinned returns the index of the waiting request to serve the next
// message (-1: none may take it) and whether it is given a new pin for
// it (then the caller confirms with pinConfirm or reverts with
// unassignPin). Requests with an id that is not the pin are answered
// "423 Nats-Wrong-Pin-Id" and dropped on the way; requests without an id
// are passed over while the pin lives.
func (c *Consumer) pickPinned(now time.Time, outs []Out) (int, bool, []Out) {
	for i := 0; i < len(c.waiting); {
		r := c.waiting[i]
		switch {
		case r.expired(now):
			outs = append(outs, r.status(jsapi.StatusTimeout, jsapi.DescRequestTimeout))
			c.removeAt(i)
		case c.pin.id == "" && r.pinID == "":
			c.pin = pinState{id: c.newPinID(), ts: now, deadline: now.Add(c.cfg.PriorityTimeout)}
			r.pinID = c.pin.id
			return i, true, outs
		case r.pinID == "":
			i++ // a standby: waits while the pin lives
		case r.pinID == c.pin.id:
			return i, false, outs
		default:
			outs = append(outs, r.status(jsapi.StatusPinIDMismatch, jsapi.DescWrongPinID))
			c.removeAt(i)
		}
	}
	return -1, false, outs
}

func (c *Consumer) newPinID() string {
	id := c.pinIDs()
	if id == "" {
		panic("consumer: PinIDs returned an empty pin id")
	}
	return id
}

// pinConfirm is the Pinned Out of a pin given by pickPinned, sent before
// the message that carries it.
func (c *Consumer) pinConfirm(r *request) Out {
	return Out{Kind: Pinned, Reply: r.reply, PinID: c.pin.id, Group: c.cfg.PriorityGroups[0]}
}

// unassignPin ends the pin without a trace (a pin given for a message
// that did not fit the request).
func (c *Consumer) unassignPin(r *request) {
	c.pin = pinState{}
	r.pinID = ""
}

// unpin ends the current pin, if any, with an Unpinned Out.
func (c *Consumer) unpin(reason string, outs []Out) []Out {
	if c.pin.id == "" {
		return outs
	}
	c.pin = pinState{}
	return append(outs, Out{Kind: Unpinned, Group: c.cfg.PriorityGroups[0], Reason: reason})
}

// expirePin ends the pin when its client has not pulled for
// priority_timeout.
func (c *Consumer) expirePin(now time.Time, outs []Out) []Out {
	if c.pin.id != "" && !now.Before(c.pin.deadline) {
		outs = c.unpin("timeout", outs)
	}
	return outs
}

// Unpin ends the pin of priority group group (CONSUMER.UNPIN): the next
// message goes to the oldest waiting request without a pin id, which is
// pinned anew; the old pin's pulls get 423. Without a pin it changes
// nothing. It fails with ErrNoPriorityGroup when the consumer has no
// such group (also when it has no groups at all), and dispatches.
func (c *Consumer) Unpin(now time.Time, group string) ([]Out, error) {
	c.observe(now)
	if !slices.Contains(c.cfg.PriorityGroups, group) {
		return nil, ErrNoPriorityGroup
	}
	if c.stopped {
		return nil, nil
	}
	outs := c.unpin("admin", nil)
	return c.dispatch(now, outs), nil
}

// priorityGroups is ConsumerInfo's priority_groups: the group and its pin.
func (c *Consumer) priorityGroups() []jsapi.PriorityGroupState {
	if len(c.cfg.PriorityGroups) == 0 {
		return nil
	}
	return []jsapi.PriorityGroupState{{Group: c.cfg.PriorityGroups[0], PinnedClientID: c.pin.id, PinnedTS: c.pin.ts.UTC()}}
}
