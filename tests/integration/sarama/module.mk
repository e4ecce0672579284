# tests/integration/sarama/module.mk: build/tests/sarama_check, the Sarama
# side of tests/integration/test_sarama.py. Debian's Sarama 1.22.1
# (golang-github-shopify-sarama-dev) and its dependencies are sources under
# /usr/share/gocode/src: the program builds in GOPATH mode with Debian's go,
# nothing downloaded (GOPROXY=off), its build cache under $(BUILD) so that a
# clean tree builds it once (about 30 s, most of it DataDog/zstd's cgo).
SARAMA_CHECK := $(BUILD)/tests/sarama_check
SARAMA_GOENV := GO111MODULE=off GOPATH=/usr/share/gocode GOPROXY=off GOFLAGS= GOENV=off \
	GOCACHE=$(abspath $(BUILD))/go-cache CGO_CFLAGS="-O2 -g -Wno-deprecated-declarations"

$(SARAMA_CHECK): $(wildcard tests/integration/sarama/*.go) | $(SETUP_STAMP)
	$(Q)mkdir -p $(@D)
	@$(if $(Q),echo "  GO      $@")
	$(Q)$(SARAMA_GOENV) go build -o $@ ./tests/integration/sarama

test-bins: $(SARAMA_CHECK)
