package jetstream

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/stratamesh/strata/broker/jsapi"
	"github.com/stratamesh/strata/broker/natsproto"
	"github.com/stratamesh/strata/tenancy"
)

// forwardedPull is a pull request a client of this broker made, which
// this broker forwarded to the owner of its topic. If the topic's owner
// changes while the request may still be waiting there (the owner died
// or handed the bundle over), the request is gone with it: the client is
// told "409 Leadership Change" so that it pulls again at once (nats.go
// resets its pending counts and re-issues the pull).
type forwardedPull struct {
	topic   tenancy.Name
	owner   string
	expires time.Time
}

// pullPrefix is the subject prefix of pull requests.
const pullPrefix = "$JS.API.CONSUMER.MSG.NEXT."

// defaultPullLifetime bounds how long a forwarded pull without an expiry
// (a no_wait pull, or one that waits forever) is tracked.
const defaultPullLifetime = 5 * time.Minute

// trackPull records a client's pull request forwarded to owner.
func (s *Service) trackPull(name tenancy.Name, owner string, m message) {
	if m.origin != s.cfg.Name || m.reply == "" || !strings.HasPrefix(m.subject, pullPrefix) {
		return
	}
	life := defaultPullLifetime
	var req jsapi.PullRequest
	if json.Unmarshal(m.data, &req) == nil && req.Expires > 0 {
		life = time.Duration(req.Expires) + time.Second
	}
	s.mu.Lock()
	s.fwdPulls[m.reply] = forwardedPull{topic: name, owner: owner, expires: time.Now().Add(life)}
	s.mu.Unlock()
}

// checkForwardedPulls tells the clients whose forwarded pulls went to a
// broker that no longer owns their topic to pull again, and forgets
// expired ones.
func (s *Service) checkForwardedPulls() {
	now := time.Now()
	var moved []string
	s.mu.Lock()
	for reply, p := range s.fwdPulls {
		switch {
		case now.After(p.expires):
			delete(s.fwdPulls, reply)
		case s.ownerOf(p.topic) != p.owner:
			delete(s.fwdPulls, reply)
			moved = append(moved, reply)
		}
	}
	s.mu.Unlock()
	for _, reply := range moved {
		hdr := natsproto.AppendStatusHeader(nil, jsapi.StatusConflict, jsapi.DescLeadershipChange)
		s.srv.DeliverLocal([]byte(reply), []byte(reply), nil, hdr, nil)
	}
}
