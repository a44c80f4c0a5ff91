"""Binlog decoding: events, column values, transactions, and the transports that read them."""
