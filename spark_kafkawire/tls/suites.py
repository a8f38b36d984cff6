"""The TLS cipher suites the decoder names and decrypts, as data: IANA id -> name, record protection,
key length and the hash of the key schedule."""

#: cipher suites: id -> (IANA name, protection ("gcm", "chacha", "cbc-<MAC hash>"; None: not decrypted
#: here), key length, hash of the PRF/HKDF)
SUITES: dict[int, tuple[str, str | None, int, str]] = {
    0x1301: ("TLS_AES_128_GCM_SHA256", "gcm", 16, "sha256"),
    0x1302: ("TLS_AES_256_GCM_SHA384", "gcm", 32, "sha384"),
    0x1303: ("TLS_CHACHA20_POLY1305_SHA256", "chacha", 32, "sha256"),
    0xC02B: ("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "gcm", 16, "sha256"),
    0xC02C: ("TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "gcm", 32, "sha384"),
    0xC02F: ("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "gcm", 16, "sha256"),
    0xC030: ("TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "gcm", 32, "sha384"),
    0xCCA8: ("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "chacha", 32, "sha256"),
    0xCCA9: ("TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", "chacha", 32, "sha256"),
    0xCCAA: ("TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "chacha", 32, "sha256"),
    0x009C: ("TLS_RSA_WITH_AES_128_GCM_SHA256", "gcm", 16, "sha256"),
    0x009D: ("TLS_RSA_WITH_AES_256_GCM_SHA384", "gcm", 32, "sha384"),
    0x009E: ("TLS_DHE_RSA_WITH_AES_128_GCM_SHA256", "gcm", 16, "sha256"),
    0x009F: ("TLS_DHE_RSA_WITH_AES_256_GCM_SHA384", "gcm", 32, "sha384"),
    # AES-CBC with HMAC (TLS 1.1 and 1.2; encrypt-then-MAC where negotiated)
    0x002F: ("TLS_RSA_WITH_AES_128_CBC_SHA", "cbc-sha1", 16, "sha256"),
    0x0035: ("TLS_RSA_WITH_AES_256_CBC_SHA", "cbc-sha1", 32, "sha256"),
    0x003C: ("TLS_RSA_WITH_AES_128_CBC_SHA256", "cbc-sha256", 16, "sha256"),
    0x003D: ("TLS_RSA_WITH_AES_256_CBC_SHA256", "cbc-sha256", 32, "sha256"),
    0xC009: ("TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", "cbc-sha1", 16, "sha256"),
    0xC00A: ("TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", "cbc-sha1", 32, "sha256"),
    0xC013: ("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", "cbc-sha1", 16, "sha256"),
    0xC014: ("TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", "cbc-sha1", 32, "sha256"),
    0xC023: ("TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256", "cbc-sha256", 16, "sha256"),
    0xC024: ("TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384", "cbc-sha384", 32, "sha384"),
    0xC027: ("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", "cbc-sha256", 16, "sha256"),
    0xC028: ("TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384", "cbc-sha384", 32, "sha384"),
    # named, not decrypted
    0x000A: ("TLS_RSA_WITH_3DES_EDE_CBC_SHA", None, 24, "sha256"),
    0x0005: ("TLS_RSA_WITH_RC4_128_SHA", None, 16, "sha256"),
}
#: the suites TLS 1.3 defines (RFC 8446 B.4); every other suite is TLS 1.2's or older
TLS13_SUITES = frozenset({0x1301, 0x1302, 0x1303})
