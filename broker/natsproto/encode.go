package natsproto

import (
	"slices"
	"strconv"
)

// The Append functions encode one op at the end of dst and return the
// extended slice. They allocate only when dst must grow (once, to the
// op's size), and do not validate their arguments: subjects, sids, queue
// names and reply subjects must be non-empty and free of whitespace
// (see ValidLiteralSubject), and a header, when not nil, a whole header
// block of at least 12 bytes ("NATS/1.0\r\n\r\n", see AppendStatusHeader).

// sizeDigits bounds the bytes two decimal sizes, their separators and the
// two CRLFs take.
const sizeDigits = 2*20 + 8

// AppendMsg appends a delivery to a client (NATS protocol: MSG, HMSG):
//
//	MSG <subject> <sid> [reply] <#payload>\r\n<payload>\r\n            (header == nil)
//	HMSG <subject> <sid> [reply] <#hdr> <#total>\r\n<header><payload>\r\n
//
// reply is left out when empty.
func AppendMsg(dst []byte, subject, sid, reply, header, payload []byte) []byte {
	dst = slices.Grow(dst, len("HMSG ")+len(subject)+len(sid)+len(reply)+len(header)+len(payload)+sizeDigits)
	if header == nil {
		dst = append(dst, "MSG "...)
	} else {
		dst = append(dst, "HMSG "...)
	}
	dst = append(dst, subject...)
	dst = append(dst, ' ')
	dst = append(dst, sid...)
	return appendTail(dst, reply, header, payload)
}

// AppendPub appends a publish (NATS protocol: PUB, HPUB), as a client or
// the route client sends it:
//
//	PUB <subject> [reply] <#payload>\r\n<payload>\r\n                  (header == nil)
//	HPUB <subject> [reply] <#hdr> <#total>\r\n<header><payload>\r\n
//
// reply is left out when empty.
func AppendPub(dst []byte, subject, reply, header, payload []byte) []byte {
	dst = slices.Grow(dst, len("HPUB ")+len(subject)+len(reply)+len(header)+len(payload)+sizeDigits)
	if header == nil {
		dst = append(dst, "PUB "...)
	} else {
		dst = append(dst, "HPUB "...)
	}
	dst = append(dst, subject...)
	return appendTail(dst, reply, header, payload)
}

// appendTail appends " [reply] [#hdr ]#total\r\n<header><payload>\r\n".
func appendTail(dst, reply, header, payload []byte) []byte {
	if len(reply) > 0 {
		dst = append(dst, ' ')
		dst = append(dst, reply...)
	}
	dst = append(dst, ' ')
	if header != nil {
		dst = strconv.AppendInt(dst, int64(len(header)), 10)
		dst = append(dst, ' ')
	}
	return appendBody(dst, header, payload)
}

// appendBody appends "#total\r\n<header><payload>\r\n".
func appendBody(dst, header, payload []byte) []byte {
	dst = strconv.AppendInt(dst, int64(len(header)+len(payload)), 10)
	dst = append(dst, "\r\n"...)
	dst = append(dst, header...)
	dst = append(dst, payload...)
	return append(dst, "\r\n"...)
}

// AppendRMsg appends a message on a Strata route link (Strata's RMSG):
//
//	RMSG <subject> <reply-marker> <#hdr> <#total>[ <queue>...]\r\n<header><payload>\r\n
//
// The reply marker is "-" when reply is empty, else "+" followed by reply.
// #hdr is 0 when header is empty. queues are the queue groups the sender
// chose this route for.
func AppendRMsg(dst []byte, subject, reply, header, payload []byte, queues [][]byte) []byte {
	n := len("RMSG  + ") + len(subject) + len(reply) + len(header) + len(payload) + sizeDigits
	for _, q := range queues {
		n += 1 + len(q)
	}
	dst = slices.Grow(dst, n)
	dst = append(dst, "RMSG "...)
	dst = append(dst, subject...)
	if len(reply) == 0 {
		dst = append(dst, " - "...)
	} else {
		dst = append(dst, " +"...)
		dst = append(dst, reply...)
		dst = append(dst, ' ')
	}
	dst = strconv.AppendInt(dst, int64(len(header)), 10)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, int64(len(header)+len(payload)), 10)
	for _, q := range queues {
		dst = append(dst, ' ')
		dst = append(dst, q...)
	}
	dst = append(dst, "\r\n"...)
	dst = append(dst, header...)
	dst = append(dst, payload...)
	return append(dst, "\r\n"...)
}

// AppendRouteSub appends "RS+ <subject>[ <queue>]\r\n" (Strata's RS+:
// the sender has interest in subject, for queue group queue if not empty).
func AppendRouteSub(dst []byte, subject, queue []byte) []byte {
	return appendRouteInterest(dst, "RS+ ", subject, queue)
}

// AppendRouteUnsub appends "RS- <subject>[ <queue>]\r\n" (Strata's RS-:
// the sender no longer has that interest).
func AppendRouteUnsub(dst []byte, subject, queue []byte) []byte {
	return appendRouteInterest(dst, "RS- ", subject, queue)
}

func appendRouteInterest(dst []byte, op string, subject, queue []byte) []byte {
	dst = slices.Grow(dst, len(op)+len(subject)+1+len(queue)+2)
	dst = append(dst, op...)
	dst = append(dst, subject...)
	if len(queue) > 0 {
		dst = append(dst, ' ')
		dst = append(dst, queue...)
	}
	return append(dst, "\r\n"...)
}

// AppendErr appends "-ERR '<text>'\r\n" (NATS protocol: -ERR). text should
// be one of the texts clients know (ErrText, §1.9 of nats-wire.md); it
// must not contain CR or LF.
func AppendErr(dst []byte, text string) []byte {
	dst = slices.Grow(dst, len("-ERR ''\r\n")+len(text))
	dst = append(dst, "-ERR '"...)
	dst = append(dst, text...)
	return append(dst, "'\r\n"...)
}
