package jsapi

// Response envelopes (spec §2.1–§2.2). Every API reply is a JSON object
// with "type" set to one of the Type… values; an error reply adds "error".
// Reply bodies that embed an info struct do so by pointer, as the
// reference does, so an error reply carries no zero-valued info fields.

// The "type" values of API replies.
const (
	typePrefix                 = "io.nats.jetstream.api.v1."
	TypeAccountInfoResponse    = typePrefix + "account_info_response"
	TypeStreamCreateResponse   = typePrefix + "stream_create_response"
	TypeStreamUpdateResponse   = typePrefix + "stream_update_response"
	TypeStreamInfoResponse     = typePrefix + "stream_info_response"
	TypeStreamDeleteResponse   = typePrefix + "stream_delete_response"
	TypeStreamPurgeResponse    = typePrefix + "stream_purge_response"
	TypeStreamNamesResponse    = typePrefix + "stream_names_response"
	TypeStreamListResponse     = typePrefix + "stream_list_response"
	TypeStreamMsgGetResponse   = typePrefix + "stream_msg_get_response"
	TypeConsumerCreateResponse = typePrefix + "consumer_create_response"
	TypeConsumerInfoResponse   = typePrefix + "consumer_info_response"
	TypeConsumerDeleteResponse = typePrefix + "consumer_delete_response"
	TypeConsumerNamesResponse  = typePrefix + "consumer_names_response"
	TypeConsumerListResponse   = typePrefix + "consumer_list_response"
	TypeConsumerUnpinResponse  = typePrefix + "consumer_unpin_response"
)

// Response is the envelope every API reply starts with.
type Response struct {
	Type  string    `json:"type"`
	Error *APIError `json:"error,omitempty"`
}

// ErrorResponse is the whole reply for a failed API request of kind k:
// {"type":…,"error":{"code":…,"err_code":…,"description":…}}, plus the
// fields the reference's reply type for k always carries, zero-valued:
// the paging block of STREAM.INFO and the names and list replies,
// "purged":0 of STREAM.PURGE, and the names or list array (null for
// STREAM.NAMES, empty for the others, as the reference initialises them).
func ErrorResponse(k Kind, err *APIError) any {
	r := Response{Type: k.ResponseType(), Error: err}
	switch k {
	case KindStreamInfo:
		return StreamInfoResponse{Response: r}
	case KindStreamPurge:
		return StreamPurgeResponse{Response: r}
	case KindStreamNames:
		return StreamNamesResponse{Response: r}
	case KindStreamList:
		return StreamListResponse{Response: r, Streams: []*StreamInfo{}}
	case KindConsumerNames:
		return ConsumerNamesResponse{Response: r, Consumers: []string{}}
	case KindConsumerList:
		return ConsumerListResponse{Response: r, Consumers: []*ConsumerInfo{}}
	}
	return r
}

// Paged is the paging block of list and names replies.
type Paged struct {
	Total  int `json:"total"`
	Offset int `json:"offset"`
	Limit  int `json:"limit"`
}

// PagedRequest is the paging part of list and names requests.
type PagedRequest struct {
	Offset int `json:"offset"`
}

// SuccessResponse is the reply to STREAM.DELETE and CONSUMER.DELETE:
// {"type":…,"success":true}.
type SuccessResponse struct {
	Response
	Success bool `json:"success,omitempty"`
}
