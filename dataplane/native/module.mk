# dataplane/native/: the native datagram protocol (format, and later the
# broker's engine and the client library).
CORE_SRCS += $(wildcard dataplane/native/*.c)
