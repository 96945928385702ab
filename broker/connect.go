package broker

import (
	"encoding/json"
	"fmt"
	"net"
	"strconv"
)

// connectOpts is the part of a client's CONNECT the broker acts on
// (NATS protocol: CONNECT). Unknown keys are ignored.
type connectOpts struct {
	Verbose      *bool  `json:"verbose"` // missing means true, as the reference does
	Pedantic     bool   `json:"pedantic"`
	Echo         *bool  `json:"echo"` // missing means true
	Headers      bool   `json:"headers"`
	NoResponders bool   `json:"no_responders"`
	Protocol     int    `json:"protocol"`
	Name         string `json:"name"`
	Lang         string `json:"lang"`
	Version      string `json:"version"`
	User         string `json:"user"`
	Pass         string `json:"pass"`
	Token        string `json:"auth_token"`
	JWT          string `json:"jwt"`
	NKey         string `json:"nkey"`
	Sig          string `json:"sig"`
}

// Client-visible refusals of CONNECT (NATS protocol §1.3); each is sent as
// -ERR before the broker closes the connection.
const (
	errTextBadProtocol     = "invalid client protocol"
	errTextNoRespHeaders   = "no responders requires headers support"
	errTextAuth            = "Authorization Violation"
	errTextAuthTimeout     = "Authentication Timeout"
	errTextStale           = "Stale Connection"
	errTextSlowConsumer    = "Slow Consumer"
	errTextInvalidSubject  = "Invalid Subject"
	errTextUnknownOp       = "Unknown Protocol Operation"
	errTextRouteRegion     = "route refused: different mesh or region"
	errTextConnectRequired = "Authorization Violation"
	errTextAuthExpired     = "User Authentication Expired"
	errTextAuthRevoked     = "Authorization Violation"
	errTextMaxPayload      = "Maximum Payload Violation"
	errTextMaxSubs         = "Maximum Subscriptions Exceeded"
)

// parseConnect decodes a CONNECT argument. It returns the -ERR text to send
// (then close) when the options are unacceptable.
func parseConnect(arg []byte) (connectOpts, string, error) {
	var o connectOpts
	if err := json.Unmarshal(arg, &o); err != nil {
		return o, errTextUnknownOp, fmt.Errorf("CONNECT: %w", err)
	}
	if o.Protocol < 0 || o.Protocol > 1 {
		return o, errTextBadProtocol, fmt.Errorf("CONNECT: protocol %d", o.Protocol)
	}
	if o.NoResponders && !o.Headers {
		return o, errTextNoRespHeaders, fmt.Errorf("CONNECT: no_responders without headers")
	}
	return o, "", nil
}

func (o connectOpts) verbose() bool { return o.Verbose == nil || *o.Verbose }
func (o connectOpts) echo() bool    { return o.Echo == nil || *o.Echo }

// serverInfo is the INFO a client gets on accept (NATS protocol §1.2).
type serverInfo struct {
	ServerID      string   `json:"server_id"`
	ServerName    string   `json:"server_name"`
	Version       string   `json:"version"`
	Proto         int      `json:"proto"`
	Go            string   `json:"go"`
	Host          string   `json:"host"`
	Port          int      `json:"port"`
	Headers       bool     `json:"headers"`
	MaxPayload    int      `json:"max_payload"`
	ClientID      uint64   `json:"client_id"`
	ClientIP      string   `json:"client_ip,omitempty"`
	AuthRequired  bool     `json:"auth_required,omitempty"`
	Nonce         string   `json:"nonce,omitempty"`
	TLSRequired   bool     `json:"tls_required,omitempty"`
	TLSVerify     bool     `json:"tls_verify,omitempty"`
	JetStream     bool     `json:"jetstream"`
	Region        string   `json:"cluster,omitempty"`
	ConnectURLs   []string `json:"connect_urls,omitempty"`
	StrataVersion string   `json:"strata_version,omitempty"`
}

// hostPort splits a listener address into host and numeric port.
func hostPort(a net.Addr) (string, int) {
	h, p, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String(), 0
	}
	n, _ := strconv.Atoi(p)
	return h, n
}
