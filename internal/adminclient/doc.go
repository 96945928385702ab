// Package adminclient is the client side of the admin HTTP API that
// `strata admin` uses: finding a node to ask (an explicit --url, or any
// answering node of each region in mesh.json) and decoding answers and the
// API's error shape. It must not contain presentation (tables live in
// cmd/strata) or server logic.
package adminclient
