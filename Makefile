# trajring build and test entry points. `make test` is what CI runs.
GO ?= go

.PHONY: test test-go vet

test: vet test-go

vet:
	CGO_ENABLED=0 $(GO) build ./...
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting"; exit 1; }

test-go:
	$(GO) test -race -count=1 ./...
