// Package tlsconf turns the topology's tls section into what each listener
// and client needs: *tls.Config for servers (with or without client
// certificates) and for clients, the Serf keyring key and etcd's root
// password. It also makes the files of a development mesh (a local CA, a
// node certificate for 127.0.0.1/localhost, a client certificate, a gossip
// key and an etcd password) for `strata up --secure`.
//
// It owns no goroutines and does no I/O after Load (certificates are read
// once, when a node starts; rotating them means restarting the node). All
// cryptography is the standard library's: crypto/tls for the handshakes,
// crypto/x509 and crypto/ecdsa to make the development CA.
//
// Errors name the topology field and the file at fault, e.g.
// "tls.cert_file /etc/strata/node.pem: certificate is not signed by
// tls.ca_file /etc/strata/ca.pem: …".
package tlsconf
