# The gateway's container image: one static binary, CA certificates and an
# unprivileged user, nothing else (no shell, no package manager).
#
#   docker build -t codemode-gateway .                 # compiles in a Go image
#   docker buildx build --platform linux/arm64 .       # cross-compiles
#   make image                                         # from this machine's build
#
# ROOTFS says where the image's files come from: "build" compiles them in
# the Go image below; make image passes "prebuilt", the bin/rootfs directory
# it made on the host, and no Go image is pulled.
ARG GO_IMAGE=golang:1.26-bookworm
ARG ROOTFS=build

FROM --platform=$BUILDPLATFORM ${GO_IMAGE} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG TARGETOS=linux
ARG TARGETARCH
RUN GOOS=$TARGETOS GOARCH=$TARGETARCH make rootfs VERSION=$VERSION

FROM scratch AS prebuilt
COPY bin/rootfs/ /src/bin/rootfs/

FROM ${ROOTFS} AS rootfs

FROM scratch
COPY --from=rootfs /src/bin/rootfs/ /
# The user of deploy/image/passwd; Kubernetes' runAsNonRoot needs it numeric.
USER 65532:65532
ENTRYPOINT ["/gateway"]
CMD ["serve", "--config", "/etc/codemode/gateway.yaml"]
